#!/usr/bin/env bash
# test/tiers/deb.sh — the Debian package built, linted, installed on this machine and
# purged (make deb-check).
#
# `make deb` builds build/deb/bulkwrite_VERSION_ARCH.deb from scratch; lintian must find
# no error and no warning in it. Then, as root, `dpkg -i` installs it on this machine:
# the programs run from /usr/bin (--version, --help, check-config of the conffile), every
# file is where Debian 12 expects it (dpkg -L), the config is a conffile, the bulkwrite
# user exists, no unit is enabled and no daemon started, and bw-workload (a test tool)
# is not there. An edited conffile survives a reinstall and a remove; the purge takes it
# and every other file away, and the links that enabled the units (bw-consumer@PORT's
# too). Starts no server. Refuses to run where bulkwrite is installed already (a package
# or `make install PREFIX=/usr`), and leaves the machine as it found it, on failure too:
# the package purged, the user it made deleted.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
WORK=$(mktemp -d /tmp/bw-deb.XXXXXX)
# the check helper only (no stack is started)
# shellcheck source=lib.sh
source test/lib.sh

VERSION=$(cat VERSION)
DEB=build/deb/bulkwrite_${VERSION}_$(dpkg --print-architecture).deb
PROGRAMS=(bw-proxy bw-consumer bwctl)
CONF=/etc/bulkwrite/bulkwrite.conf
# what the package must hold, each file checked on disk after the install and gone after the purge
FILES=(/usr/bin/bw-proxy /usr/bin/bw-consumer /usr/bin/bwctl "$CONF"
    /lib/systemd/system/bw-proxy.service /lib/systemd/system/bw-consumer.service /lib/systemd/system/bw-consumer@.service
    /usr/lib/sysusers.d/bulkwrite.conf
    /usr/share/man/man1/bw-proxy.1.gz /usr/share/man/man1/bw-consumer.1.gz /usr/share/man/man1/bwctl.1.gz
    /usr/share/doc/bulkwrite/README.md /usr/share/doc/bulkwrite/docs/deployment.md /usr/share/doc/bulkwrite/copyright
    /usr/share/doc/bulkwrite/examples/bulkwrite.conf /usr/include/bulkwrite/v1/bulkwrite.proto
    /usr/share/bulkwrite/monitoring/bulkwrite.rules.yml /usr/share/bulkwrite/monitoring/grafana-dashboard.json)

fail() { echo "not ok - $*"; echo "0 passed, 1 failed"; rm -rf "$WORK"; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "test/tiers/deb.sh installs a package on this machine: run it as root"
# one run at a time on this machine (two checkouts' make check side by side would install
# and purge each other's package): the checks below come after the lock
exec 8>/run/lock/bulkwrite-deb-check.lock && flock 8 || fail "cannot take /run/lock/bulkwrite-deb-check.lock"
installed_status() { dpkg-query -W -f='${Status}' bulkwrite 2>/dev/null; }
case $(installed_status) in *installed* | *config-files*)
    fail "bulkwrite is installed on this machine already ($(installed_status)): not touching it" ;;
esac
for f in "${FILES[@]}" /usr/bin/bw-workload; do
    [ ! -e "$f" ] || fail "$f exists (make install PREFIX=/usr?): the package would take it over and its purge remove it"
done

# the user is the package's to make (sysusers), but Debian leaves system users behind on
# purge: deleted here only when this run made it
user_existed=0
getent passwd bulkwrite >/dev/null && user_existed=1
# No unit is enabled, so nothing starts (the package's own property, checked below); on a
# machine running systemd this keeps a broken package from starting daemons on the ports
# the other tiers use. Made only when there is none (install-deps.sh does the same).
policy=/usr/sbin/policy-rc.d made_policy=0
WANTS=/etc/systemd/system/multi-user.target.wants made_wants=0
if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1; fi

# dpkg waits for a lock another apt or dpkg holds (make deps in a parallel session)
dpkg_locked() {
    local i out rc
    for i in $(seq 60); do
        out=$(dpkg "$@" </dev/null 2>&1); rc=$?
        if [ "$rc" -ne 0 ] && grep -q 'lock' <<<"$out"; then sleep 2; continue; fi
        echo "$out"; return "$rc"
    done
    echo "$out"; return 1
}

cleanup() {
    if installed_status >/dev/null; then dpkg_locked --purge bulkwrite >/dev/null || echo "deb.sh: dpkg --purge bulkwrite failed"; fi
    if [ "$user_existed" = 0 ] && getent passwd bulkwrite >/dev/null; then userdel bulkwrite; fi
    if [ "$user_existed" = 0 ] && getent group bulkwrite >/dev/null; then groupdel bulkwrite; fi
    [ "$made_policy" = 0 ] || rm -f "$policy"
    find /etc/systemd/system -type l -name 'bw-*' -lname '/lib/systemd/system/bw-*' -delete 2>/dev/null
    [ "$made_wants" = 0 ] || rmdir "$WANTS" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

build() { make --no-print-directory -s deb && [ -f "$DEB" ]; }
version_is_release() { [ "$(dpkg-deb -f "$DEB" Version)" = "$VERSION" ] || { dpkg-deb -f "$DEB" Version; return 1; }; }
# lintian exits 2 on a tag at the levels named; it prints the tags
lint() { lintian --fail-on error,warning "$DEB"; }
no_test_tools() { ! dpkg-deb -c "$DEB" | grep -e bw-workload -e bw-kafka-embedded -e bw-bench; }

programs_run() {
    local p
    for p in bw-proxy bw-consumer; do
        /usr/bin/$p --version | grep -qx "$p $VERSION (commit [0-9a-f]*)" || { echo "$p --version: $(/usr/bin/$p --version)"; return 1; }
    done
    for p in "${PROGRAMS[@]}"; do /usr/bin/$p --help >/dev/null || { echo "/usr/bin/$p --help failed"; return 1; }; done
    # bwctl --version comes with issue 45's item 1: checked once bwctl has it
    if /usr/bin/bwctl --help | grep -q -- '--version'; then
        /usr/bin/bwctl --version | grep -q "^bwctl $VERSION" || { echo "bwctl --version: $(/usr/bin/bwctl --version)"; return 1; }
    else echo "bwctl has no --version yet: not checked"; fi
}

check_config() { # from /, so no relative conf/bulkwrite.conf can stand in for it
    (cd / && /usr/bin/bwctl -c "$CONF" check-config) || return 1
    # and by default, once bwctl's default is the installed config (issue 45, item 1)
    if /usr/bin/bwctl --help | grep -qF "$CONF"; then (cd / && /usr/bin/bwctl check-config); fi
}

files_in_place() {
    local listed f
    listed=$(dpkg -L bulkwrite) || return 1
    for f in "${FILES[@]}"; do
        grep -qxF "$f" <<<"$listed" || { echo "dpkg -L bulkwrite does not list $f"; return 1; }
        [ -f "$f" ] || { echo "$f is listed but not on disk"; return 1; }
    done
}

units_point_at_the_install() {
    local u doc
    grep -qx 'ExecStart=/usr/bin/bw-proxy -c /etc/bulkwrite/bulkwrite.conf' /lib/systemd/system/bw-proxy.service || return 1
    grep -qx 'ExecStart=/usr/bin/bw-consumer -c /etc/bulkwrite/bulkwrite.conf' /lib/systemd/system/bw-consumer.service || return 1
    for u in bw-proxy.service bw-consumer.service bw-consumer@.service; do
        doc=$(sed -n 's|^Documentation=file:||p' "/lib/systemd/system/$u")
        [ -n "$doc" ] && [ -f "$doc" ] || { echo "$u: Documentation=file:$doc is not installed"; return 1; }
    done
}

is_conffile() { dpkg-query -W -f='${Conffiles}\n' bulkwrite | grep -q "^ $CONF [0-9a-f]\{32\}$"; }

user_made() {
    local entry
    entry=$(getent passwd bulkwrite) || { echo "no bulkwrite user"; return 1; }
    echo "$entry"
    case $entry in *:/usr/sbin/nologin | *:/sbin/nologin) ;; *) echo "the bulkwrite user can log in"; return 1 ;; esac
}

# deb-systemd-helper enable would leave its links under /etc/systemd/system even on a
# machine without systemd; and no process runs the installed daemons
nothing_started() {
    local links exe pid
    links=$(find /etc/systemd/system -name 'bw-*' 2>/dev/null)
    [ -z "$links" ] || { echo "enabled: $links"; return 1; }
    for pid in /proc/[0-9]*; do
        exe=$(readlink "$pid/exe" 2>/dev/null) || continue
        case $exe in /usr/bin/bw-proxy | /usr/bin/bw-consumer) echo "running: ${pid#/proc/} $exe"; return 1 ;; esac
    done
}

no_workload() { ! dpkg -L bulkwrite | grep bw-workload && [ ! -e /usr/bin/bw-workload ]; }

reinstall_keeps_edit() {
    echo "# edited by an operator" >>"$CONF"
    dpkg_locked -i "$DEB" || return 1
    grep -q '^# edited by an operator$' "$CONF" || { echo "the reinstall replaced the edited $CONF"; return 1; }
}

removed_keeps_conf() {
    local f
    dpkg_locked --remove bulkwrite || return 1
    [ "$(installed_status)" = "deinstall ok config-files" ] || { echo "status: $(installed_status)"; return 1; }
    for f in "${FILES[@]}"; do
        [ "$f" = "$CONF" ] || [ ! -e "$f" ] || { echo "$f left behind by dpkg --remove"; return 1; }
    done
    grep -q '^# edited by an operator$' "$CONF" || { echo "dpkg --remove did not keep the edited $CONF"; return 1; }
}

purged() {
    local f links
    # enabled as `systemctl enable bw-proxy.service bw-consumer@18081.service` would
    [ -d "$WANTS" ] || { mkdir -p "$WANTS" && made_wants=1; }
    ln -s /lib/systemd/system/bw-proxy.service "$WANTS/bw-proxy.service" || return 1
    ln -s /lib/systemd/system/bw-consumer@.service "$WANTS/bw-consumer@18081.service" || return 1
    dpkg_locked --purge bulkwrite || return 1
    links=$(find /etc/systemd/system -name 'bw-*')
    [ -z "$links" ] || { echo "the purge left the units' links: $links"; return 1; }
    ! installed_status >/dev/null || [ "$(installed_status)" = "unknown ok not-installed" ] || { echo "status: $(installed_status)"; return 1; }
    for f in "${FILES[@]}"; do [ ! -e "$f" ] || { echo "$f left behind by dpkg --purge"; return 1; }; done
    [ ! -e /etc/bulkwrite ] || { echo "/etc/bulkwrite left behind: $(ls -A /etc/bulkwrite)"; return 1; }
}

check "make deb builds $DEB from scratch" build
[ -f "$DEB" ] || { echo "$passed passed, $failed failed"; exit 1; }
check "the package's version is VERSION's ($VERSION)" version_is_release
check "lintian finds no error and no warning" lint
check "the package holds no test tool (bw-workload, bw-kafka-embedded, bw-bench)" no_test_tools
check "dpkg -i installs it" dpkg_locked -i "$DEB"
check "no unit is enabled and no daemon started" nothing_started
check "the programs run from /usr/bin: --version says $VERSION, --help" programs_run
check "bwctl check-config accepts the installed $CONF" check_config
check "every file is where Debian 12 expects it (dpkg -L, and on disk)" files_in_place
check "the units run /usr/bin's programs with $CONF, their Documentation= is installed" units_point_at_the_install
check "$CONF is a conffile" is_conffile
check "the bulkwrite system user exists, without a login shell" user_made
check "bw-workload is not installed" no_workload
check "a reinstall keeps an edited $CONF" reinstall_keeps_edit
check "dpkg --remove removes the programs and keeps the edited $CONF" removed_keeps_conf
check "dpkg --purge removes every file, $CONF, /etc/bulkwrite and the links that enabled the units" purged

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
