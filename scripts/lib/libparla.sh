# Sourced by scripts/install and scripts/check-c: libparla's pkg-config file.
#
# write_parla_pc PREFIX VERSION FILE: Libs carries an rpath unless PREFIX/lib is where the
# dynamic loader looks by itself (/usr/lib; /usr/local/lib once ldconfig has run), so that a
# program built with `pkg-config --libs parla` against ~/.local finds libparla.so.0 when it runs.
write_parla_pc() {
  local prefix=$1 version=$2 file=$3 rpath=' -Wl,-rpath,${libdir}'
  case "$prefix" in /usr|/usr/local) rpath='' ;; esac
  mkdir -p "$(dirname "$file")"
  cat >"$file" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: parla
Description: Speech in the right language, with word events timed to what is heard (espeak-ng and Piper voices)
Version: $version
Libs: -L\${libdir} -lparla$rpath
Cflags: -I\${includedir}
PC
}
