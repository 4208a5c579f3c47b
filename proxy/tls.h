/* tls.h — HTTPS on the proxy's listeners, and client certificates as credentials.
 *
 * With proxy.tls.cert_file and key_file both listeners (data and admin) speak HTTPS
 * only (libmicrohttpd with GnuTLS, TLS 1.2 and 1.3). With proxy.tls.client_ca_file each
 * client is asked for a certificate; one presented is verified here, per request, by
 * GnuTLS against those CAs (signature chain, validity dates, key purpose TLS client),
 * and its identity (the first DNS or URI subject alternative name, else the common name)
 * is what auth.c maps to a client's cert_identity. A certificate that does not verify
 * is refused (401) with GnuTLS' reason, whatever else the request carries.
 *
 * The files are read once, at startup: new certificates need a restart (the check in
 * bw_daemon_reload refuses a SIGHUP that changes proxy.tls). */
#ifndef BW_TLS_H
#define BW_TLS_H

#include <gnutls/x509.h>
#include <microhttpd.h>
#include <stddef.h>

#include "config.h"
#include "daemon.h"

typedef struct {
    char *cert_pem, *key_pem, *ca_pem; /* the files' text; ca_pem NULL without client CAs */
    bw_listen_tls_t listen;            /* points into the above, for bw_daemon_listen */
    int require_client_cert;
} bw_tls_t;

/* Reads and checks conf's proxy.tls files (relative to conf's folder): the keys go
 * together, the certificate and key parse and match, the CA file holds a certificate.
 * 0 with *tls set (NULL: plain HTTP, cert_file ""), or -1 with errstr naming the key and
 * the file. The result lives as long as the listeners: bw_tls_free after they stop. */
int bw_tls_load(const bw_config_t *conf, bw_tls_t **tls, char *errstr, size_t errstr_size);
void bw_tls_free(bw_tls_t *tls);

/* The identity of a certificate: its first DNS or URI subject alternative name, else its
 * common name. 0, or -1 with why when it has neither or the name is not 1 to
 * BW_AUTH_IDENTITY_MAX printable ASCII characters. */
int bw_tls_cert_identity(gnutls_x509_crt_t crt, char *identity, size_t size, char *why, size_t why_size);

/* The client certificate of the connection c: 1 with its verified identity, 0 when the
 * client presented none (or the connection is plain HTTP), -1 with why (GnuTLS' reason)
 * when it does not verify. @locality the connection's thread */
int bw_tls_peer_identity(struct MHD_Connection *c, char *identity, size_t size, char *why, size_t why_size);

#endif
