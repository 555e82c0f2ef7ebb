#!/usr/bin/env bash
# A throwaway one-node Slurm cluster for the tests (Debian 12 slurm-wlm 22.05 + munge).
#
#   slurm_cluster.sh start DIR [OWNER_PID]   # DIR: an empty directory; everything goes there
#   slurm_cluster.sh stop DIR    # cancel every job, stop the daemons, kill what is left
#   slurm_cluster.sh procs DIR   # list the live processes of that cluster; exit 1 if any
#
# Every command of the cluster then needs SLURM_CONF=DIR/slurm.conf (start prints that line).
# Nothing outside DIR is read or written: own munge key, socket, pid/log/seed files; own
# slurm.conf, state and spool directories; slurmctld and slurmd on free ports, in the
# foreground (-D), not as system services. So two runs in a row start clean, and daemons a
# crashed run left behind (other DIR, other ports, other munge socket) do not get in the way.
#
# The configuration avoids what a container cannot offer: no cgroups (proctrack/linuxproc
# finds a job's processes by parentage, task/none binds nothing, jobacct_gather/none), no
# accounting database, no slurmd from /etc. The node claims 8 CPUs whatever the machine has
# (SlurmdParameters=config_overrides), so a 1 PS x 2 worker job fits on a 2-core machine.
#
# With OWNER_PID (a test's pid), a watchdog stops the cluster once that process is gone: a test
# killed by its timeout does not leave daemons running.
#
# "Processes of the cluster" = those whose command line names DIR (munged, slurmctld, slurmd)
# or whose environment holds SLURM_CONF=DIR/slurm.conf: the daemons are started with it, and
# slurmd passes its environment to every slurmstepd and srun passes the caller's to the tasks.
set -euo pipefail

die() { echo "slurm_cluster.sh: $*" >&2; exit 1; }
[[ $# -eq 2 || ($# -eq 3 && $1 == start) ]] ||
  die "usage: slurm_cluster.sh start DIR [OWNER_PID] | stop DIR | procs DIR"
# Without a caller's SLURM_CONF (a test that exported this cluster's), even in /proc/PID/environ
# of this script's subshells, which keeps the environment it was started with: otherwise they
# and the commands it runs would look like processes of the cluster. Each slurm command gets
# it below.
[[ -v SLURM_CONF ]] && exec env -u SLURM_CONF "$BASH" "${BASH_SOURCE[0]}" "$@"
cmd=$1
dir=$(realpath -m -- "$2")
owner=${3:-}
conf=$dir/slurm.conf

# Field $2 of /proc/$1/stat (3 = state, 4 = parent), counted as proc(5) does; the command
# name in field 2 may hold spaces, so count from its closing parenthesis.
stat_field() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  local rest=(${stat##*) })
  echo "${rest[$2 - 3]}"
}

# This shell and its ancestors: a caller that exported SLURM_CONF is not a cluster process.
ancestors=" "
for ((a = BASHPID; a > 1; a = $(stat_field $a 4 || echo 1))); do ancestors+="$a "; done

# pids of the live (not zombie) processes that belong to the cluster in $dir, except this
# shell and its ancestors. One grep over every command line, one over every environment.
cluster_pids() {
  local p
  for p in $( (grep -slF -- "$dir/" /proc/[0-9]*/cmdline
               grep -slzxF -- "SLURM_CONF=$conf" /proc/[0-9]*/environ) |
             sed 's|^/proc/||; s|/.*||' | sort -un); do
    [[ $ancestors == *" $p "* ]] && continue
    # The greps themselves have exited by now (no stat); zombies are dead already.
    [[ $(stat_field "$p" 3) == [RSD] ]] && echo "$p"
  done
  return 0
}

describe_pids() {
  local p
  for p in "$@"; do
    echo "  pid $p ($(cat "/proc/$p/comm" 2>/dev/null)): $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
  done
}

# Free TCP ports: bound to port 0 by the kernel, then released (the daemons bind them a moment
# later; a clash shows as a daemon that does not start, reported below).
free_ports() {
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# Waits (at most $1 seconds) for the command in the remaining arguments to succeed.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

start() {
  [[ -d $dir ]] || die "$dir: no such directory"
  [[ -z $(ls -A "$dir") ]] || die "$dir is not empty"
  local node; node=$(hostname -s)
  mkdir -p "$dir"/{munge,state,spool,log}
  chmod 700 "$dir" "$dir/munge"

  # munge: a fresh key; munged insists on owner-only permissions along the key's path and, as
  # root, refuses to start without --force (it would rather run as user munge).
  mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  local socket=$dir/munge/munge.socket
  munged --force --socket="$socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" ||
    die "munged did not start: $(tail -n 5 "$dir/log/munged.log" 2>/dev/null)"
  wait_for 10 munge --socket="$socket" -n || die "munged does not answer on $socket"

  local ports ctld_port slurmd_port
  ports=$(free_ports 2); read -r ctld_port slurmd_port <<<"$ports"
  cat >"$conf" <<EOF
# Written by tests/slurm/slurm_cluster.sh for one test run; everything lives in $dir.
ClusterName=psbench-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in a container: track processes by parentage, bind nothing, gather nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
# No mail from a test cluster (and no "MailProg is invalid" in its log).
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# The node says it has 8 CPUs whatever the machine has: 3 tasks fit on 2 cores.
SlurmdParameters=config_overrides
ReturnToService=2
# Quick teardown and quick failure reports.
KillWait=2
MinJobAge=2
InactiveLimit=0
MessageTimeout=10
SlurmdTimeout=60
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF

  # SLURM_CONF is given to each slurm command, not exported: the commands this script runs to
  # find the cluster's processes must not look like them.
  # In the foreground (-D) as background jobs of this shell; their output goes to files, so
  # that whoever waits on this script's stdout is not held by them.
  SLURM_CONF=$conf slurmctld -D -i -f "$conf" >"$dir/log/slurmctld.out" 2>&1 </dev/null &
  echo $! >"$dir/slurmctld.launch.pid"
  SLURM_CONF=$conf slurmd -D -f "$conf" >"$dir/log/slurmd.out" 2>&1 </dev/null &
  echo $! >"$dir/slurmd.launch.pid"

  local deadline=$((SECONDS + 30)) state=""
  while ((SECONDS < deadline)); do
    state=$(SLURM_CONF=$conf sinfo -h -N -n "$node" -o %T 2>/dev/null || true)
    [[ $state == idle ]] && break
    kill -0 "$(cat "$dir/slurmctld.launch.pid")" 2>/dev/null || break
    kill -0 "$(cat "$dir/slurmd.launch.pid")" 2>/dev/null || break
    sleep 0.2
  done
  if [[ $state != idle ]]; then
    echo "slurm_cluster.sh: node $node not idle within 30 s (state: ${state:-none})" >&2
    tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmctld.out" "$dir/log/slurmd.log" \
      "$dir/log/slurmd.out" >&2 2>/dev/null || true
    stop
    exit 1
  fi
  if [[ -n $owner ]]; then
    # Not a cluster process by the rules above (no DIR/ in its command line): stop kills it
    # by its pid file, unless stop is the watchdog itself.
    # It waits with read -t on a FIFO nothing writes to, not sleep: a sleep child would outlive
    # a killed watchdog for up to a second and count as a process left behind.
    mkfifo "$dir/watchdog.fifo"
    (
      trap '' HUP
      exec 3<>"$dir/watchdog.fifo"
      while kill -0 "$owner" 2>/dev/null; do read -rt 1 -u 3 || true; done
      stop
    ) >>"$dir/log/watchdog.out" 2>&1 </dev/null &
    echo $! >"$dir/watchdog.pid"
  fi
  echo "SLURM_CONF=$conf"
}

stop() {
  local watchdog
  watchdog=$(cat "$dir/watchdog.pid" 2>/dev/null || true)
  [[ -n $watchdog && $watchdog != "$BASHPID" ]] && kill "$watchdog" 2>/dev/null || true
  # Through Slurm first, while slurmctld lives (a dead one would make scancel retry for 10 s).
  local ctld
  ctld=$(cat "$dir/slurmctld.launch.pid" 2>/dev/null || true)
  if [[ -n $ctld ]] && kill -0 "$ctld" 2>/dev/null && [[ $(stat_field "$ctld" 3) != Z ]]; then
    SLURM_CONF=$conf timeout 10 scancel --quiet --full --user="$(id -un)" >/dev/null 2>&1 || true
    # Give running steps a moment to end through Slurm (KillWait=2) before signalling.
    local deadline=$((SECONDS + 5))
    while ((SECONDS < deadline)) && [[ -n $(SLURM_CONF=$conf timeout 5 squeue -h 2>/dev/null) ]]; do sleep 0.2; done
  fi
  local pids
  pids=$(cluster_pids)
  [[ -n $pids ]] && kill -TERM $pids 2>/dev/null || true
  local deadline=$((SECONDS + 5))
  while ((SECONDS < deadline)) && [[ -n $(cluster_pids) ]]; do sleep 0.1; done
  pids=$(cluster_pids)
  [[ -n $pids ]] && kill -KILL $pids 2>/dev/null || true
  deadline=$((SECONDS + 5))
  while ((SECONDS < deadline)) && [[ -n $(cluster_pids) ]]; do sleep 0.1; done
  pids=$(cluster_pids)
  if [[ -n $pids ]]; then
    echo "slurm_cluster.sh: still running after SIGKILL:" >&2
    describe_pids $pids >&2
    return 1
  fi
}

case $cmd in
  start) start ;;
  stop) stop ;;
  procs)
    pids=$(cluster_pids)
    [[ -z $pids ]] && exit 0
    describe_pids $pids
    exit 1 ;;
  *) die "unknown command $cmd (start, stop or procs)" ;;
esac
