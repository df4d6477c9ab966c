# Sourced by scripts/test and scripts/check-live-stability: which tests make up the live phase,
# and the environment they run in.

# The tests that play live audio through private sound servers (and buses, displays and
# speech-dispatchers of their own).
live_tests='ParlaTests\.(LiveSpeechTests|LiveRecoveryTests|DuckingTests)|ParlaCLITests\.(LiveCLITests|SpeakSelectionTests|SpeechdTests|CLITests)'

# Points every variable by which a program finds the session's sound server, buses, display
# and speech-dispatcher at a socket that nobody listens on. A test that forgets to hand a child
# its private server then fails (connection refused) instead of quietly reaching the session's
# server or bus on a developer's desktop (and passing or failing by what that desktop runs).
# The live test `theSessionsServersAreOutOfReach` checks that this is in force.
isolate_from_session() {
  local dead
  dead=$(mktemp -d /tmp/parla-dead.XXXXXX)
  # A bound socket with no listener: connect() is refused at once.
  python3 - "$dead" <<'PY'
import os, socket, sys
for name in ("pulse-native", "bus", "at-spi-bus", "speechd.sock", "wayland-0"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(sys.argv[1], name))
    s.close()
PY
  export PARLA_DEAD_SESSION=$dead
  export PULSE_SERVER=unix:$dead/pulse-native
  export DBUS_SESSION_BUS_ADDRESS=unix:path=$dead/bus
  export AT_SPI_BUS_ADDRESS=unix:path=$dead/at-spi-bus
  export SPEECHD_ADDRESS=unix_socket:$dead/speechd.sock
  export WAYLAND_DISPLAY=$dead/wayland-0
  # An X display number no server has.
  export DISPLAY=:4093
}
