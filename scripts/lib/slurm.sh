# A one-node Slurm of Debian's packages for scripts/check-slurm and scripts/bench-slurm:
# slurmctld, slurmd and munged on this machine, their state in a private directory ($work),
# their own ports, reached at 127.0.0.1 (a fresh root may not resolve its own host name); the
# node offers 4 CPUs whatever the machine has (config_overrides), so a 4-task array runs at
# once, as a one-machine run's 4 workers do.
#   source scripts/lib/slurm.sh; slurm_start   (needs root: slurmd starts tasks as their user)
# Then: array DIR (a 4-task array of Examples/slurm/render-array.sbatch over $input into DIR,
# with ${options[@]}; prints its id), wait_for ID (sets $most), $parla, $input, $work.

slurm_install() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
      command -v sudo >/dev/null || { echo "error: need root or sudo to install slurm-wlm and munge" >&2; exit 1; }
      sudo=(sudo)
    fi
    echo "Installing slurm-wlm and munge" >&2
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
  fi
  [ "$(id -u)" -eq 0 ] || { echo "error: run as root (slurmd starts the tasks as their user)" >&2; exit 1; }
}

slurm_stop() {
  [ -f "$work/slurmd.pid" ] && kill "$(cat "$work/slurmd.pid")" 2>/dev/null || true
  [ -f "$work/slurmctld.pid" ] && kill "$(cat "$work/slurmctld.pid")" 2>/dev/null || true
  [ -f "$work/munged.pid" ] && kill "$(cat "$work/munged.pid")" 2>/dev/null || true
  # A daemon that failed to start, or had not yet written its pid file, is found by its config path.
  pkill -f -- "-f $work/slurm.conf" 2>/dev/null || true
  sleep 0.5
  pkill -KILL -f -- "-f $work/slurm.conf" 2>/dev/null || true
  [ -n "${PARLA_KEEP_SLURM:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}

slurm_start() {
  slurm_install
  # A step that fails says which, with the daemons' last words (set -e would exit silently).
  trap 'echo "error: ${BASH_SOURCE[0]}:$LINENO failed: $BASH_COMMAND" >&2; tail -5 "$work"/*.log >&2 2>/dev/null' ERR
  work=$(mktemp -d /tmp/parla-slurm.XXXXXX)
  chmod 755 "$work"
  trap slurm_stop EXIT
  # munge: a key of its own and a socket in the private directory.
  mkdir -m 700 "$work/munge"
  dd if=/dev/urandom of="$work/munge/key" bs=1024 count=1 status=none
  chmod 400 "$work/munge/key"
  munged --force --key-file="$work/munge/key" --socket="$work/munge/socket" --pid-file="$work/munged.pid" \
    --log-file="$work/munged.log" --seed-file="$work/munge/seed"
  local host port memory
  host=$(hostname -s)
  # Two free ports below the kernel's ephemeral range (a port drawn inside it was once taken by
  # an outgoing connection: slurmctld died with "Address already in use" and sinfo waited on it).
  local low
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  for _ in $(seq 50); do
    port=$((10000 + RANDOM % (low - 10002)))
    ss -Htan "( sport = :$port or sport = :$((port + 1)) )" 2>/dev/null | grep -q . || break
  done
  memory=$(slurmd -C | grep -o 'RealMemory=[0-9]*' | head -1)
  mkdir -p "$work/state" "$work/spool"
  cat > "$work/slurm.conf" <<CONF
ClusterName=parla-check
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/socket,cred_expire=15
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MessageTimeout=30
ReturnToService=2
MpiDefault=none
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 $memory State=UNKNOWN
PartitionName=check Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  export SLURM_CONF="$work/slurm.conf"
  # A daemon that fails before its log is open says why only in the foreground.
  local daemon
  for daemon in slurmctld slurmd; do
    "$daemon" -f "$SLURM_CONF" && continue
    echo "error: $daemon did not start; in the foreground it says:" >&2
    timeout 5 "$daemon" -D -f "$SLURM_CONF" 2>&1 | grep -E "error|fatal" | tail -5 >&2 || true
    exit 1
  done
  # Each question bounded (sinfo waits MessageTimeout, 30 s, for a controller that is not there),
  # and a controller that died says so at once.
  for _ in $(seq 100); do
    timeout 5 sinfo -h -o %t 2>/dev/null | grep -q idle && break
    if [ -s "$work/slurmctld.pid" ] && ! kill -0 "$(cat "$work/slurmctld.pid")" 2>/dev/null; then
      echo "error: slurmctld stopped while starting:" >&2; tail -5 "$work/slurmctld.log" >&2; exit 1
    fi
    sleep 0.2
  done
  timeout 5 sinfo -h -o %t | grep -q idle || { echo "error: the Slurm node did not come up:" >&2; tail -20 "$work/slurmctld.log" "$work/slurmd.log" >&2; exit 1; }
  cpus=$(sinfo -h -o %c)
  echo "Slurm $(sinfo -V | cut -d' ' -f2) up: one node, $cpus CPUs" >&2
  input=${input:-$(realpath bench/render-corpus.tsv)}
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/parla"
  export PARLA_PIPER_VOICES="$cache/piper-voices" PARLA_ONNXRUNTIME="$cache/onnxruntime/libonnxruntime.so.1" PARLA="$parla"
  options=(--isolate --prefer-voice en=piper.en_US-joe-medium)
  job=$(realpath Examples/slurm/render-array.sbatch)
}

# Runs the array into $1; prints the job id.
array() {
  sbatch --parsable --array=0-3 --cpus-per-task=1 --chdir="$work" --export=ALL --output="$work/task-%a.log" "$job" "$input" "$1" "${options[@]}"
}

# Waits for the job $1 and everything it requeues; $most: the most tasks seen running at once.
wait_for() {
  most=0
  local running
  while squeue -h -j "$1" 2>/dev/null | grep -q .; do
    running=$(squeue -h -j "$1" -t RUNNING 2>/dev/null | wc -l)
    [ "$running" -gt "$most" ] && most=$running
    sleep 0.2
  done
}
