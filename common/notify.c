#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

/* Fills addr from NOTIFY_SOCKET's value and returns the address length, or 0 (errno
 * set) for a value that is no AF_UNIX socket name (too long, or another family such as
 * systemd 254's "vsock:"). */
static socklen_t notify_address(const char *name, struct sockaddr_un *addr) {
    size_t len = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || len >= sizeof(addr->sun_path)) {
        errno = name[0] == '/' || name[0] == '@' ? ENAMETOOLONG : EAFNOSUPPORT;
        return 0;
    }
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path, name, len);
    /* an abstract name has no terminator: its length is the address's length */
    if (name[0] == '@') {
        addr->sun_path[0] = '\0';
        return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    }
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
}

int bw_notify(const char *state) {
    const char *name = getenv("NOTIFY_SOCKET");
    if (!name || !name[0]) return 0;
    struct sockaddr_un addr;
    socklen_t addr_len = notify_address(name, &addr);
    int fd = addr_len ? socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0) : -1;
    size_t len = strlen(state);
    ssize_t sent = -1;
    /* a full socket queue fails at once (EAGAIN) instead of holding the daemon */
    if (fd >= 0) sent = sendto(fd, state, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&addr, addr_len);
    int saved = errno;
    if (fd >= 0 && close(fd) && sent >= 0) saved = errno, sent = -1;
    if (sent >= 0 && (size_t)sent != len) saved = EMSGSIZE, sent = -1;
    if (sent >= 0) return 0;
    bw_log(BW_LOG_WARN, "notify", -1, NULL, "cannot tell systemd \"%.40s\" on NOTIFY_SOCKET %s: %s", state, name,
           strerror(saved));
    errno = saved;
    return -1;
}
