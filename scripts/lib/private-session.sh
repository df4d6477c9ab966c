# Sourced by the benchmarks: a private PulseAudio daemon with one null sink (and, through HOME
# and XDG_RUNTIME_DIR, a private speech-dispatcher and config), stopped on exit.
# Sets: dir, PULSE_SERVER, XDG_RUNTIME_DIR, HOME, XDG_CONFIG_HOME. Sink name: parla_bench.

install_baselines() {
  local missing=() p
  for p in speech-dispatcher speech-dispatcher-espeak-ng "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "Installing: ${missing[*]}" >&2
    local sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

start_private_session() {
  dir=$(mktemp -d /tmp/parla-bench.XXXXXX)
  export XDG_RUNTIME_DIR=$dir HOME=$dir XDG_CONFIG_HOME=$dir/config
  pulseaudio -n --daemonize=no --exit-idle-time=-1 --use-pid-file=no --system=no --disallow-exit \
    --disable-shm=yes --log-level=error \
    -L "module-native-protocol-unix socket=$dir/native auth-anonymous=1" \
    -L "module-null-sink sink_name=parla_bench rate=22050 channels=1" >/dev/null 2>&1 &
  pulse=$!
  xvfb=
  trap stop_private_session EXIT
  export PULSE_SERVER=unix:$dir/native
  for _ in $(seq 100); do [ -S "$dir/native" ] && break; sleep 0.05; done
}

start_private_display() {
  Xvfb -displayfd 3 -nolisten tcp 3>"$dir/display" >/dev/null 2>&1 &
  xvfb=$!
  for _ in $(seq 100); do [ -s "$dir/display" ] && break; sleep 0.05; done
  export DISPLAY=:$(tr -dc 0-9 <"$dir/display")
}

stop_private_session() {
  local spd_pid
  spd_pid=$(cat "$dir"/speech-dispatcher/pid/speech-dispatcher.pid 2>/dev/null || true)
  [ -n "$spd_pid" ] && kill "$spd_pid" 2>/dev/null || true
  [ -n "$xvfb" ] && kill "$xvfb" 2>/dev/null || true
  kill "$pulse" 2>/dev/null || true
  wait "$pulse" 2>/dev/null || true
  rm -rf "$dir"
}
