#!/usr/bin/env bash
# Builds libspiel (the Spiel speech client library) and its `spiel` CLI into a private prefix,
# once: if $PREFIX/bin/spiel exists it builds nothing. Either way it prints, on stdout, the
# environment a caller needs (build output goes to stderr), so use it as
#     eval "$(scripts/lib/build-libspiel.sh)"
#     "$LIBSPIEL_PREFIX/bin/spiel" -p org.parla.Speech.Provider -v espeak-ng.en-us "Hello world"
# It exports LIBSPIEL_PREFIX, LD_LIBRARY_PATH (libspiel-1.0.so, libspeech-provider-1.0.so),
# GI_TYPELIB_PATH (Spiel-1.0 / SpeechProvider-1.0 typelibs for PyGObject), GSETTINGS_SCHEMA_DIR
# (org.monotonous.libspiel; optional to libspiel) and PKG_CONFIG_PATH. The binaries carry an
# rpath, so `spiel` itself runs without LD_LIBRARY_PATH. Without a sound server, SPIEL_TEST=1
# makes libspiel play into a fakesink (not in real time); otherwise autoaudiosink falls back to
# a fake sink that plays in real time. The CLI prints no events (libspiel emits word-started,
# sentence-started, range-started and mark-reached signals, seen only through the library).
# Env: PARLA_LIBSPIEL_PREFIX (default ${XDG_CACHE_HOME:-~/.cache}/parla/libspiel; note that
# scripts/lib/private-session.sh changes HOME, so eval this before it), PARLA_LIBSPIEL_GIT and
# PARLA_SPEECHPROVIDER_GIT (git sources; default the local mirrors, else GitHub).
# Notes: Debian 12 ships GLib 2.74 while both projects ask for >= 2.76 without using newer API,
# so the requirement is lowered in the temporary checkout. libspeechprovider is built and
# installed first and libspiel then finds it through pkg-config (its meson subproject fallback
# lacks the iface_xml variable libspiel reads).
set -euo pipefail

cache=${XDG_CACHE_HOME:-$HOME/.cache}/parla
prefix=${PARLA_LIBSPIEL_PREFIX:-$cache/libspiel}
mirror=/work/.mirror/project-spiel
default_src() { [ -d "$mirror+$1/repo" ] && echo "$mirror+$1/repo" || echo "https://github.com/project-spiel/$1.git"; }
libspiel_git=${PARLA_LIBSPIEL_GIT:-$(default_src libspiel)}
speechprovider_git=${PARLA_SPEECHPROVIDER_GIT:-$(default_src libspeechprovider)}

print_env() {
  cat <<EOF
export LIBSPIEL_PREFIX='$prefix'
export LD_LIBRARY_PATH='$prefix/lib'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export GI_TYPELIB_PATH='$prefix/lib/girepository-1.0'\${GI_TYPELIB_PATH:+:\$GI_TYPELIB_PATH}
export GSETTINGS_SCHEMA_DIR='$prefix/share/glib-2.0/schemas'
export PKG_CONFIG_PATH='$prefix/lib/pkgconfig'\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
EOF
}

if [ -x "$prefix/bin/spiel" ]; then print_env; exit 0; fi

{
  # Build tools and -dev packages; the GStreamer plugins are runtime needs (audioconvert,
  # rawaudioparse, volume from -base; autoaudiosink from -good).
  packages=(git gcc pkg-config python3-venv libglib2.0-dev libglib2.0-bin
    libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-plugins-base
    gstreamer1.0-plugins-good gobject-introspection libgirepository1.0-dev)
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "build-libspiel: installing ${missing[*]}"
    sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
  fi

  # meson >= 1.3.2 (Debian 12 has 1.0.1) and ninja from PyPI.
  venv=$cache/meson-venv
  [ -x "$venv/bin/meson" ] && [ -x "$venv/bin/ninja" ] || {
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet meson ninja
  }
  export PATH=$venv/bin:$PATH

  work=$(mktemp -d /tmp/parla-libspiel.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log"; return 1; }; }
  local_url() { [ -d "$1" ] && echo "file://$(cd "$1" && pwd)" || echo "$1"; }
  git clone --quiet --depth 1 "$(local_url "$speechprovider_git")" "$work/libspeechprovider"
  git clone --quiet --depth 1 "$(local_url "$libspiel_git")" "$work/libspiel"
  sed -i -E "s/^glib_version = .*/glib_version = '>= 2.74'/" \
    "$work/libspeechprovider/meson.build" "$work/libspiel/meson.build"

  rm -rf "$prefix"  # no bin/spiel: whatever is there is a partial install
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  options=(--prefix "$prefix" --libdir lib --buildtype release --wrap-mode nodownload
    -Dc_link_args="-Wl,-rpath,$prefix/lib" -Ddocs=false -Dtests=false)
  quiet meson setup "$work/libspeechprovider/build" "$work/libspeechprovider" "${options[@]}"
  quiet meson install -C "$work/libspeechprovider/build"
  quiet meson setup "$work/libspiel/build" "$work/libspiel" "${options[@]}"
  # Stage libspiel's install and move bin/spiel in last, so it only exists once all is in place
  # (meson skips compiling the schemas when DESTDIR is set).
  DESTDIR=$work/stage quiet meson install -C "$work/libspiel/build"
  mv "$work/stage$prefix/bin/spiel" "$work/spiel"
  cp -a "$work/stage$prefix/." "$prefix/"
  glib-compile-schemas "$prefix/share/glib-2.0/schemas"
  mv "$work/spiel" "$prefix/bin/spiel"
  echo "build-libspiel: installed into $prefix"
} >&2

print_env
