#!/usr/bin/env bash
# gpu-deps.sh: cJSON and PCRE2 for the device machine, whose image has neither (and no apt, nor
# any network). Run here, on the Debian 12 build machine, before the device call:
#
#   bash launch/gpu-deps.sh
#   run(command="bash launch/gpu-check.sh", carry=["build-gpu-deps"], timeout_s=360)
#
# Downloads Debian's libcjson1, libcjson-dev, libpcre2-8-0 and libpcre2-dev (amd64) with
# `apt-get download`, extracts them with `dpkg -x` and keeps in build-gpu-deps/ (ignored by git,
# under 1 MB) only the headers (cjson/cJSON.h, pcre2.h), the two shared libraries, each a plain
# file under its soname (libcjson.so.1, libpcre2-8.so.0: no symbolic links to travel), their .pc
# files and .packages (the versions). No docs, man pages, static archives or other PCRE2 widths.
#
# launch/gpu-check.sh's standalone mode takes the system's cJSON / PCRE2 when it has them, else
# these (-I build-gpu-deps/usr/include, -l:<soname> with an rpath to
# build-gpu-deps/usr/lib/x86_64-linux-gnu; MT_GPU_CHECK_DEPS=carried forces them).
# Idempotent: nothing is downloaded when the folder is complete. On failure: one line
# "gpu-deps: error: ..." on stderr, exit 1, and the folder as it was.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P) || exit 1
DEST=$ROOT/build-gpu-deps
PACKAGES=(libcjson1:amd64 libcjson-dev:amd64 libpcre2-8-0:amd64 libpcre2-dev:amd64)
LIB=usr/lib/x86_64-linux-gnu
LIBS=(cjson pcre2-8) # lib<name>.so.<major>, what the build links
HEADERS=(usr/include/cjson/cJSON.h usr/include/pcre2.h)

die() {
  echo "gpu-deps: error: $*" >&2
  exit 1
}
# complete DIR: the headers and each library as a plain file under its soname
complete() {
  local f l so
  [ -f "$1/.packages" ] || return 1
  for f in "${HEADERS[@]}"; do [ -f "$1/$f" ] || return 1; done
  for l in "${LIBS[@]}"; do
    so=$(find "$1/$LIB" -maxdepth 1 -type f -regex ".*/lib$l\.so\.[0-9]+" | head -1)
    [ -n "$so" ] || return 1
  done
}
summary() { echo "$1 ($(du -sh "$1" | cut -f1): $(paste -sd' ' "$1/.packages"))"; }

if complete "$DEST"; then
  echo "gpu-deps: up to date: $(summary "$DEST")"
  exit 0
fi
command -v apt-get > /dev/null || die "no apt-get: run this on the Debian build machine, not on the device"
command -v dpkg-deb > /dev/null || die "no dpkg-deb: run this on the Debian build machine"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpu-deps.XXXXXX") || die "cannot make a temporary directory"
trap 'rm -rf "$TMP"' EXIT
# apt's download sandbox user (_apt) writes into debs/ when this runs as root
if ! chmod 755 "$TMP" || ! mkdir -m 777 "$TMP/debs" || ! mkdir "$TMP/root"; then
  die "cannot write into $TMP"
fi
R=$TMP/root

# apt-get download needs the package lists: updated once when a name is unknown
download() { (cd "$TMP/debs" && apt-get download "${PACKAGES[@]}") >> "$TMP/apt.log" 2>&1; }
if ! download; then
  [ "$(id -u)" = 0 ] && apt-get update -qq >> "$TMP/apt.log" 2>&1
  download || die "apt-get download ${PACKAGES[*]} failed: $(grep -m1 -E '^E:' "$TMP/apt.log" | cut -c1-200)"
fi
for d in "$TMP"/debs/*.deb; do
  [ -f "$d" ] || die "apt-get download left no .deb"
  dpkg-deb -x "$d" "$R" 2>> "$TMP/apt.log" || die "dpkg -x $(basename "$d") failed"
  # shellcheck disable=SC2016 # dpkg-deb's format, not the shell's
  dpkg-deb -W --showformat='${Package}=${Version}\n' "$d" >> "$R/.packages" ||
    die "dpkg-deb -W $(basename "$d") failed"
done

# each library as a plain file under its soname; then only the headers, those files and their
# .pc files stay
for l in "${LIBS[@]}"; do
  so=$(find "$R/$LIB" -maxdepth 1 -type l -regex ".*/lib$l\.so\.[0-9]+" | head -1)
  [ -n "$so" ] || die "no lib$l.so.<major> in the packages"
  if ! cp "$(readlink -f "$so")" "$so.real" || ! mv -f "$so.real" "$so"; then
    die "cannot copy lib$l's library"
  fi
done
for f in "$R/$LIB"/*; do
  [ -d "$f" ] && continue
  keep=0
  for l in "${LIBS[@]}"; do [[ ${f##*/} =~ ^lib$l\.so\.[0-9]+$ ]] && keep=1; done
  [ "$keep" = 1 ] || rm -f "$f"
done
find "$R/$LIB/pkgconfig" ! -type d ! -name libcjson.pc ! -name libpcre2-8.pc -delete
rm -rf "${R:?}/usr/share" "${R:?}/usr/bin" "${R:?}/$LIB/cmake" "${R:?}/usr/include/pcre2posix.h"
complete "$R" || die "the packages lack a needed file (${HEADERS[*]}, lib{${LIBS[*]}}.so.<major>)"

rm -rf "$DEST.part"
if ! mv "$R" "$DEST.part" || ! rm -rf "$DEST" || ! mv "$DEST.part" "$DEST"; then
  die "cannot move the extracted files to $DEST"
fi
echo "gpu-deps: $(summary "$DEST")"
