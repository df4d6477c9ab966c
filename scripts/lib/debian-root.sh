# A minimal Debian 12 root for the checks that install Parla's packages on a clean machine
# (scripts/check-wheel, scripts/check-install): debootstrap's minbase, made once and kept as a
# tarball in ${XDG_CACHE_HOME:-~/.cache}/parla/debian-root, so that a clean clone's run does
# not make it again. Needs root and debootstrap.
#   source scripts/lib/debian-root.sh
#   base=$(debian_root_tarball)              the minbase root
#   base=$(debian_root_tarball python3 python3-venv)
#                                            the same with these packages installed, kept too
debian_root_tarball() {
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/parla/debian-root"
  local name=bookworm-minbase
  (($#)) && name="$name+$(printf '%s+' "$@" | sed 's/+$//')"
  local tarball="$dir/$name.tar"
  if [ ! -f "$tarball" ]; then
    mkdir -p "$dir"
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap >/dev/null
    local tmp
    tmp=$(mktemp -d "$dir/tmp-root.XXXXXX")
    if (($#)); then
      echo "Making a Debian 12 root with $* (once, kept in $dir)..." >&2
      tar -C "$tmp" -xf "$(debian_root_tarball)"
      cp /etc/resolv.conf "$tmp/etc/resolv.conf"
      chroot "$tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
      chroot "$tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
      chroot "$tmp" apt-get clean
    else
      echo "Making a minimal Debian 12 root (once, kept in $dir)..." >&2
      debootstrap --variant=minbase bookworm "$tmp" http://deb.debian.org/debian >&2
    fi
    tar -C "$tmp" -cf "$tarball.part" .
    rm -rf --one-file-system "$tmp"
    mv "$tarball.part" "$tarball"
  fi
  echo "$tarball"
}
