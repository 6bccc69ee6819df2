# shellcheck shell=bash
# Helpers for the SLURM e2e test (sourced, not run): a private single-node SLURM cluster on
# loopback, as root, following spec/environment.md §1 (auth/none, proctrack/linuxproc, MpiDefault
# pmix). Everything it writes (config, state, spool, logs, pid files) lives under one folder, the
# ports are picked free at start, and clients find it through SLURM_CONF, so it clashes neither
# with a system SLURM nor with another copy of this test.
#
#   slurm_can_start           -> status 0, or prints why not (not root, daemons missing) and 1
#   slurm_start DIR           -> starts slurmctld + slurmd, waits until the node is idle
#   slurm_stop                -> stops both by pid (safe to call twice, e.g. from an EXIT trap)
#   slurm_wait_job ID SECONDS -> polls until job ID and its requeues have ended; prints its state
#   slurm_logs                -> the daemons' log tails, for failure messages

slurm_can_start() {
  local tool
  for tool in slurmctld slurmd sbatch srun squeue sinfo scontrol scancel; do
    command -v "$tool" > /dev/null 2>&1 || {
      echo "$tool not found (scripts/install-deps.sh installs slurmctld, slurmd, slurm-client)"
      return 1
    }
  done
  [ "$(id -u)" = 0 ] || {
    echo "not root: slurmd must run as root to start jobs"
    return 1
  }
}

# A TCP port nobody listens on now (the kernel's choice of an ephemeral port).
_slurm_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

slurm_start() {  # dir
  SLURM_DIR=$1
  mkdir -p "$SLURM_DIR"/{state,spool,log,run}
  local cpus mem_mb ctld_port slurmd_port
  # What slurmd itself counts (nproc would follow OMP_NUM_THREADS).
  cpus="$(slurmd -C 2> /dev/null | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')"
  [ -n "$cpus" ] || cpus="$(getconf _NPROCESSORS_ONLN)"
  # RealMemory above what slurmd measures makes the node INVAL (environment.md §1).
  mem_mb=$(($(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 512))
  ctld_port="$(_slurm_free_port)"
  slurmd_port="$(_slurm_free_port)"
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port="$(_slurm_free_port)"; done
  # proctrack/cgroup would make every job "complete" without running (a silent false pass).
  cat > "$SLURM_DIR/slurm.conf" << EOF
ClusterName=mdstest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MailProg=/bin/true
# A requeued job waits this credential lifetime before it may start again (default 120 s).
AuthInfo=cred_expire=5
# ... and is then started by the next scheduling pass (every 60 s by default).
SchedulerParameters=sched_interval=1,bf_interval=1
SlurmctldPidFile=$SLURM_DIR/run/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/run/slurmd.pid
SlurmdSpoolDir=$SLURM_DIR/spool
StateSaveLocation=$SLURM_DIR/state
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=localhost CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$SLURM_DIR/slurm.conf"
  # A test run inside a real SLURM job must not hand that job's identity to ours.
  unset SLURM_JOB_ID SLURM_JOBID SLURM_PROCID SLURM_NTASKS SLURM_STEP_NUM_TASKS SLURM_LOCALID
  slurmctld -c -f "$SLURM_CONF" || return 1  # -c: empty state; forks, pid in run/
  slurmd -N localhost -f "$SLURM_CONF" || return 1
  local _
  for _ in $(seq 1 150); do
    [ "$(sinfo -h -o %T 2> /dev/null)" = idle ] && return 0
    sleep 0.2
  done
  echo "the node did not become idle:" >&2
  sinfo -R >&2 || true
  slurm_logs >&2
  return 1
}

_slurm_alive() {  # pid; a zombie counts as gone (the container's PID 1 reaps lazily)
  local state
  state="$(ps -o stat= -p "$1" 2> /dev/null)"
  [ -n "$state" ] && [ "${state#Z}" = "$state" ]
}

slurm_stop() {
  [ -n "${SLURM_DIR:-}" ] || return 0
  local pid_file pid _
  # Jobs still running (a failed check) would outlive slurmd in their slurmstepd: cancel them first.
  if [ -s "$SLURM_DIR/run/slurmctld.pid" ] && _slurm_alive "$(cat "$SLURM_DIR/run/slurmctld.pid")"; then
    scancel --partition=debug 2> /dev/null || true
    for _ in $(seq 1 50); do
      [ -z "$(squeue -h -o %i 2> /dev/null)" ] && break
      sleep 0.2
    done
  fi
  for pid_file in "$SLURM_DIR/run/slurmd.pid" "$SLURM_DIR/run/slurmctld.pid"; do
    [ -s "$pid_file" ] || continue
    pid="$(cat "$pid_file")"
    _slurm_alive "$pid" && kill -TERM "$pid"
    for _ in $(seq 1 100); do
      _slurm_alive "$pid" || break
      sleep 0.1
    done
    if _slurm_alive "$pid"; then
      echo "slurm_stop: force-killing $pid ($pid_file)" >&2
      kill -KILL "$pid"
    fi
    rm -f "$pid_file"
  done
}

# Waits until the job (every task of an array job) has left the queue for good (a requeued job
# passes through PENDING again), then prints its final states (COMPLETED, FAILED, ...), one per
# distinct state. A job whose dependency failed is reported as DependencyNeverSatisfied instead of
# waiting. Fails after `seconds`.
slurm_wait_job() {  # job-id seconds
  local id=$1 deadline=$((SECONDS + $2)) info states
  while [ "$SECONDS" -lt "$deadline" ]; do
    info="$(scontrol show job "$id" 2> /dev/null || true)"
    if grep -q "Reason=DependencyNeverSatisfied" <<< "$info"; then
      echo "DependencyNeverSatisfied"
      return 0
    fi
    states="$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<< "$info" | sort -u)"
    if [ -n "$states" ] && ! grep -qE '^(PENDING|RUNNING|CONFIGURING|COMPLETING|REQUEUED|REQUEUE_FED|REQUEUE_HOLD|RESIZING|SUSPENDED|STOPPED|SIGNALING|STAGE_OUT)$' <<< "$states"; then
      echo "$states" | paste -sd' '
      return 0
    fi
    sleep 0.2
  done
  echo "TIMEOUT"
  return 1
}

slurm_logs() {
  [ -n "${SLURM_DIR:-}" ] || return 0
  tail -n 30 "$SLURM_DIR/log/slurmctld.log" "$SLURM_DIR/log/slurmd.log" 2> /dev/null || true
}
