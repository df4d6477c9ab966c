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
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# start_private_session [pulseaudio|pipewire]: PipeWire runs with a private D-Bus session
# bus, WirePlumber and pipewire-pulse, and the null sink is loaded with pactl.
start_private_session() {
  dir=$(mktemp -d /tmp/parla-bench.XXXXXX)
  chmod 700 "$dir"
  export XDG_RUNTIME_DIR=$dir HOME=$dir XDG_CONFIG_HOME=$dir/config
  pids=()
  xvfb=
  trap stop_private_session EXIT
  if [ "${1:-pulseaudio}" = pipewire ]; then
    export DBUS_SESSION_BUS_ADDRESS=unix:path=$dir/bus
    dbus-daemon --session --nofork --nopidfile --address="$DBUS_SESSION_BUS_ADDRESS" >/dev/null 2>&1 & pids+=($!)
    for _ in $(seq 100); do [ -S "$dir/bus" ] && break; sleep 0.05; done
    pipewire >/dev/null 2>&1 & pids+=($!)
    for _ in $(seq 100); do [ -S "$dir/pipewire-0" ] && break; sleep 0.05; done
    wireplumber >/dev/null 2>&1 & pids+=($!)
    pipewire-pulse >/dev/null 2>&1 & pids+=($!)
    export PULSE_SERVER=unix:$dir/pulse/native
    for _ in $(seq 100); do [ -S "$dir/pulse/native" ] && break; sleep 0.05; done
    for _ in $(seq 100); do pactl load-module module-null-sink sink_name=parla_bench rate=22050 channels=1 >/dev/null 2>&1 && break; sleep 0.05; done
    pactl set-default-sink parla_bench >/dev/null 2>&1 || true
  else
    pulseaudio -n --daemonize=no --exit-idle-time=-1 --use-pid-file=no --system=no --disallow-exit \
      --disable-shm=yes --log-level=error \
      -L "module-native-protocol-unix socket=$dir/native auth-anonymous=1" \
      -L "module-null-sink sink_name=parla_bench rate=22050 channels=1" >/dev/null 2>&1 & pids+=($!)
    export PULSE_SERVER=unix:$dir/native
    for _ in $(seq 100); do [ -S "$dir/native" ] && break; sleep 0.05; done
  fi
  pulse=${pids[0]}
}

# start_private_speechd MODULE: a speech-dispatcher of its own (configuration, socket, pid, logs
# under $dir/speechd) with MODULE as output module "parla" (the default) and speechd's own
# sd_espeak-ng as "espeak-ng", playing on the private sink. Sets SPEECHD_ADDRESS, speechd_logs.
start_private_speechd() {
  local d=$dir/speechd
  mkdir -p "$d/conf/modules" "$d/log" "$d/run"
  cat >"$d/conf/speechd.conf" <<EOF
AddModule "parla" "$(realpath "$1")" "parla.conf"
AddModule "espeak-ng" "sd_espeak-ng" "espeak-ng.conf"
DefaultModule parla
AudioOutputMethod "pulse"
AudioPulseDevice "parla_bench"
DefaultVolume 100
LogLevel 5
LogDir "$d/log"
EOF
  : >"$d/conf/modules/parla.conf"
  : >"$d/conf/modules/espeak-ng.conf"
  XDG_RUNTIME_DIR=$d/run LANG=C.UTF-8 speech-dispatcher -s -t 0 -C "$d/conf" -S "$d/sock" -P "$d/pid" -L "$d/log" >/dev/null 2>&1 &
  pids+=($!)
  export SPEECHD_ADDRESS=unix_socket:$d/sock
  speechd_logs=$d/log
  for _ in $(seq 300); do [ -S "$d/sock" ] && return; sleep 0.05; done
  echo "speech-dispatcher did not start; its log:" >&2
  tail -20 "$d/log/speech-dispatcher.log" >&2
  return 1
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
  local p
  for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
