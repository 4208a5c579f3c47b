/* tls.c — the proxy's certificate files and its clients' certificates (tls.h). */
#include "tls.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"

#define PEM_MAX (1 << 20) /* a certificate chain or a CA bundle is far smaller */

/* The file `key` names (relative to conf's folder), whole and NUL-terminated, into *out;
 * NULL for "". -1 with errstr naming the key and the file. */
static int read_key_file(const bw_config_t *conf, const char *key, const char *value, char **out, char *errstr,
                         size_t errstr_size) {
    *out = NULL;
    char *path = bw_config_file(conf, value);
    if (!path) return 0;
    FILE *f = fopen(path, "rb");
    char *text = f ? malloc(PEM_MAX + 1) : NULL;
    size_t n = text ? fread(text, 1, PEM_MAX + 1, f) : 0;
    int err = f ? ferror(f) : errno;
    if (f) fclose(f);
    if (!f || err || n > PEM_MAX) {
        bw_seterr(errstr, errstr_size, BW_ERR_IO, "%s: %s: %s", key, path,
                  !f ? strerror(err) : n > PEM_MAX ? "larger than 1 MiB, not a PEM file" : "read error");
        free(text);
        free(path);
        return -1;
    }
    text[n] = '\0';
    *out = text;
    free(path);
    return 0;
}

/* The certificate and key parse and belong together; the CA file holds a certificate:
 * GnuTLS' reason here, at startup, rather than libmicrohttpd's bare refusal to start. */
static int check_pem(const bw_config_t *conf, const bw_tls_t *t, char *errstr, size_t errstr_size) {
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "proxy.tls: cannot allocate GnuTLS credentials"), -1;
    gnutls_datum_t cert = {(unsigned char *)t->cert_pem, (unsigned)strlen(t->cert_pem)};
    gnutls_datum_t key = {(unsigned char *)t->key_pem, (unsigned)strlen(t->key_pem)};
    int rc = 0, e = gnutls_certificate_set_x509_key_mem2(cred, &cert, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (e < 0) {
        bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "proxy.tls.cert_file %s with proxy.tls.key_file %s: %s",
                  conf->proxy_tls_cert_file, conf->proxy_tls_key_file, gnutls_strerror(e));
        rc = -1;
    } else if (t->ca_pem) {
        gnutls_datum_t ca = {(unsigned char *)t->ca_pem, (unsigned)strlen(t->ca_pem)};
        e = gnutls_certificate_set_x509_trust_mem(cred, &ca, GNUTLS_X509_FMT_PEM);
        if (e <= 0) {
            bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "proxy.tls.client_ca_file %s: %s",
                      conf->proxy_tls_client_ca_file, e < 0 ? gnutls_strerror(e) : "no PEM certificate in it");
            rc = -1;
        }
    }
    gnutls_certificate_free_credentials(cred);
    return rc;
}

int bw_tls_load(const bw_config_t *conf, bw_tls_t **tls, char *errstr, size_t errstr_size) {
    *tls = NULL;
    const char *cert = conf->proxy_tls_cert_file, *key = conf->proxy_tls_key_file, *ca = conf->proxy_tls_client_ca_file;
    if (!*cert) {
        const char *set = *key ? "key_file" : *ca ? "client_ca_file" : conf->proxy_tls_require_client_cert
                                                                     ? "require_client_cert" : NULL;
        if (set)
            return bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                             "proxy.tls.%s is set but proxy.tls.cert_file is not: HTTPS needs a certificate", set), -1;
        return 0;
    }
    if (!*key)
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "proxy.tls.cert_file is set but proxy.tls.key_file "
                                                              "is not: the certificate needs its private key"), -1;
    if (conf->proxy_tls_require_client_cert && !*ca)
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "proxy.tls.require_client_cert needs "
                                                              "proxy.tls.client_ca_file, the CAs to verify them with"), -1;
    bw_tls_t *t = calloc(1, sizeof(*t));
    if (read_key_file(conf, "proxy.tls.cert_file", cert, &t->cert_pem, errstr, errstr_size) ||
        read_key_file(conf, "proxy.tls.key_file", key, &t->key_pem, errstr, errstr_size) ||
        read_key_file(conf, "proxy.tls.client_ca_file", ca, &t->ca_pem, errstr, errstr_size) ||
        check_pem(conf, t, errstr, errstr_size)) {
        bw_tls_free(t);
        return -1;
    }
    t->listen = (bw_listen_tls_t){t->cert_pem, t->key_pem, t->ca_pem};
    t->require_client_cert = conf->proxy_tls_require_client_cert;
    *tls = t;
    return 0;
}

void bw_tls_free(bw_tls_t *t) {
    if (!t) return;
    free(t->cert_pem);
    if (t->key_pem) memset(t->key_pem, 0, strlen(t->key_pem)); /* the private key does not linger in freed memory */
    free(t->key_pem);
    free(t->ca_pem);
    free(t);
}

int bw_tls_cert_identity(gnutls_x509_crt_t crt, char *identity, size_t size, char *why, size_t why_size) {
    char name[BW_AUTH_IDENTITY_MAX + 2];
    const char *what = NULL;
    for (unsigned i = 0; !what && i < 64; i++) {
        size_t len = sizeof(name) - 1;
        int type = gnutls_x509_crt_get_subject_alt_name(crt, i, name, &len, NULL);
        if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) break;
        if (type == GNUTLS_SAN_DNSNAME || type == GNUTLS_SAN_URI) what = "subject alternative name";
        else if (type == GNUTLS_E_SHORT_MEMORY_BUFFER) what = "subject alternative name (too long)";
        /* other kinds (an IP address, an e-mail address) and unreadable entries are skipped */
    }
    if (!what) {
        size_t len = sizeof(name) - 1;
        int e = gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, name, &len);
        if (e == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            return snprintf(why, why_size, "the client certificate has no DNS or URI subject alternative name "
                                           "and no common name: no identity"), -1;
        what = e == GNUTLS_E_SHORT_MEMORY_BUFFER ? "common name (too long)" : e < 0 ? "common name (unreadable)"
                                                                                     : "common name";
    }
    name[sizeof(name) - 1] = '\0';
    if (strchr(what, '(') || !bw_auth_identity_ok(name) || strlen(name) >= size)
        return snprintf(why, why_size, "the client certificate's %s is not 1 to %d printable ASCII characters",
                        what, BW_AUTH_IDENTITY_MAX), -1;
    memcpy(identity, name, strlen(name) + 1);
    return 0;
}

int bw_tls_peer_identity(struct MHD_Connection *c, char *identity, size_t size, char *why, size_t why_size) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!ci || !ci->tls_session) return 0;
    gnutls_session_t s = (gnutls_session_t)ci->tls_session;
    unsigned n = 0;
    const gnutls_datum_t *chain = gnutls_certificate_get_peers(s, &n);
    if (!chain || !n) return 0;
    /* the chain against client_ca_file, the dates, and a key purpose for TLS clients (a
     * certificate without the extension may serve any purpose) */
    gnutls_typed_vdata_st purpose = {GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0};
    unsigned status = 0;
    int e = gnutls_certificate_verify_peers(s, &purpose, 1, &status);
    if (e < 0) return snprintf(why, why_size, "client certificate not verified: %s", gnutls_strerror(e)), -1;
    if (status) {
        gnutls_datum_t out = {NULL, 0};
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) < 0) out.data = NULL;
        snprintf(why, why_size, "client certificate refused: %s", out.data ? (const char *)out.data : "not trusted");
        gnutls_free(out.data);
        return -1;
    }
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0) return snprintf(why, why_size, "client certificate: out of memory"), -1;
    int rc = gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER) < 0
                 ? (snprintf(why, why_size, "client certificate: not X.509"), -1)
                 : bw_tls_cert_identity(crt, identity, size, why, why_size);
    gnutls_x509_crt_deinit(crt);
    return rc < 0 ? -1 : 1;
}
