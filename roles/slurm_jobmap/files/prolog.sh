#!/bin/sh
# vigil-jobmap prolog (Slurm Prolog, runs as root on the GPU node before the job starts).
#
# 1. For each GPU of the job (SLURM_JOB_GPUS, e.g. "0,1" or "0-3"; else CUDA_VISIBLE_DEVICES;
#    MIG instances as "N.M"), add the job id as one line to <job map dir>/<GPU>: the format
#    dcgm-exporter reads with --hpc-job-mapping-dir (several jobs sharing a GPU: several lines).
# 2. Write <textfile dir>/slurm_job_<job id>.prom with
#    slurm_job_info{hpc_job,user,account,partition,node} 1 for node_exporter's textfile collector.
#
# Every write goes to a new file (noclobber: an existing name is never followed) in the same
# directory and is renamed into place, with the job map changed under a node-wide lock. Nothing is
# written into a directory that it, or one above it, lets anyone but root change (one log line).
# Always exits 0 (a failing prolog drains the node); problems are logged to syslog with the tag
# vigil-jobmap.
#
# Settings: /etc/vigil/jobmap.conf (KEY=value, parsed, not sourced; VIGIL_JOBMAP_CONF names
# another file), overridden by the environment: VIGIL_JOBMAP_DIR (default /run/vigil/jobmap),
# VIGIL_TEXTFILE_DIR (default /var/lib/vigil/node_exporter/textfile), VIGIL_JOBMAP_LOCK_TIMEOUT
# (seconds, default 10), VIGIL_JOBMAP_LOCK (auto | flock | mkdir). Installed by the vigil role
# slurm_jobmap; see docs/jobmap.md.

JM_PHASE=prolog

# ---- vigil-jobmap common: begin (identical in prolog.sh and epilog.sh; a unit test checks) ----
# Everything here uses shell builtins only, so a job costs few process starts: external commands
# run only to check a directory (ls), to lock (flock), to rename (mv), to remove (rm) and, on
# error paths, to log. Files are created with noclobber (set -C: a name that exists is refused,
# never followed) in directories only root can write to (jm_safe_dir).
LC_ALL=C
export LC_ALL
unset TIME_STYLE QUOTING_STYLE
umask 022
PATH=${PATH:+$PATH:}/usr/sbin:/usr/bin:/sbin:/bin
NL='
'
set -f -C
_jm_lockdir=

# Leave nothing behind and never fail the job: a non-zero prolog drains the node.
# shellcheck disable=SC2317 # called by the EXIT trap
_jm_exit() {
  if [ -n "$_jm_lockdir" ]; then
    rm -f -- "$_jm_lockdir/pid" 2>/dev/null
    rmdir -- "$_jm_lockdir" 2>/dev/null
  fi
  exit 0
}
trap '_jm_exit' EXIT
trap 'exit 0' HUP INT TERM

# jm_log PRIORITY MESSAGE: one line to syslog (tag vigil-jobmap), or to stderr without logger.
jm_log() {
  if command -v logger >/dev/null 2>&1 &&
    logger -t vigil-jobmap -p "daemon.$1" -- "$JM_PHASE: $2" 2>/dev/null; then
    return 0
  fi
  printf 'vigil-jobmap: %s: %s\n' "$JM_PHASE" "$2" >&2 2>/dev/null
  return 0
}

# jm_config: settings from /etc/vigil/jobmap.conf (KEY=value lines, parsed here, never sourced),
# then the environment, which wins. Returns 1 (after logging) if a setting is unusable.
jm_config() {
  _c_dir='' _c_tdir='' _c_timeout='' _c_lock='' _c_gres=''
  _f=${VIGIL_JOBMAP_CONF:-/etc/vigil/jobmap.conf}
  if [ -f "$_f" ] && [ -r "$_f" ]; then
    while IFS= read -r _l || [ -n "$_l" ]; do
      case $_l in '' | '#'* | *[!A-Za-z0-9_]*=* | [!A-Za-z_]*) continue ;; *=*) ;; *) continue ;; esac
      _k=${_l%%=*}
      _v=${_l#*=}
      case $_v in
        \"*\") _v=${_v#\"} _v=${_v%\"} ;;
        \'*\') _v=${_v#\'} _v=${_v%\'} ;;
      esac
      case $_k in
        VIGIL_JOBMAP_DIR) _c_dir=$_v ;;
        VIGIL_TEXTFILE_DIR) _c_tdir=$_v ;;
        VIGIL_JOBMAP_LOCK_TIMEOUT) _c_timeout=$_v ;;
        VIGIL_JOBMAP_LOCK) _c_lock=$_v ;;
        VIGIL_JOBMAP_GRES_MAP) _c_gres=$_v ;;
      esac
    done <"$_f" 2>/dev/null
  fi
  JM_DIR=${VIGIL_JOBMAP_DIR:-${_c_dir:-/run/vigil/jobmap}}
  JM_TEXTFILE_DIR=${VIGIL_TEXTFILE_DIR:-${_c_tdir:-/var/lib/vigil/node_exporter/textfile}}
  JM_LOCK_TIMEOUT=${VIGIL_JOBMAP_LOCK_TIMEOUT:-${_c_timeout:-10}}
  JM_LOCK=${VIGIL_JOBMAP_LOCK:-${_c_lock:-auto}}
  JM_GRES_MAP=${VIGIL_JOBMAP_GRES_MAP:-${_c_gres:-/etc/vigil/jobmap-gres.conf}}
  for _d in "$JM_DIR" "$JM_TEXTFILE_DIR" "$JM_GRES_MAP"; do
    case $_d in
      *"$NL"* | */../* | */.. | */./* | */.) ;;
      /*) continue ;;
    esac
    jm_log err "the job map dir, the textfile dir and the GRES map must be absolute paths without . or .. (check /etc/vigil/jobmap.conf and VIGIL_JOBMAP_DIR/VIGIL_TEXTFILE_DIR/VIGIL_JOBMAP_GRES_MAP); nothing written"
    return 1
  done
  case $JM_LOCK_TIMEOUT in '' | *[!0-9]* | ?????*) JM_LOCK_TIMEOUT=10 ;; esac
  case $JM_LOCK in flock | mkdir) ;; *) JM_LOCK=auto ;; esac
  return 0
}

# jm_jobid: JM_JOB from SLURM_JOB_ID (a Slurm job id is a 32-bit number; array and het jobs too).
jm_jobid() {
  JM_JOB=${SLURM_JOB_ID:-${SLURM_JOBID:-}}
  case $JM_JOB in
    '' | *[!0-9]* | 0* | ???????????*) return 1 ;;
  esac
  return 0
}

# jm_lock: take the node-wide lock of the job map dir, waiting at most JM_LOCK_TIMEOUT seconds
# for each lock taken. flock on .lock where flock exists; a mkdir lock .lock.d without flock or
# with VIGIL_JOBMAP_LOCK=mkdir. The two modes never run side by side unlocked: a script in one
# mode that finds the other's entry takes both locks, always flock first, then .lock.d (the flock
# side creates .lock before it looks for .lock.d, the mkdir side takes .lock.d before it looks for
# .lock, so at least one of two racing scripts sees the other). Without flock, where .lock shows
# that flock is used here, the script refuses. Links and odd files in their place are refused.
jm_lock() {
  for _e in .lock .lock.d .lock.d.break; do
    [ -h "$JM_DIR/$_e" ] || continue
    jm_log err "job $JM_JOB: $JM_DIR/$_e is a symbolic link, not followed; job map not changed"
    return 1
  done
  if [ -e "$JM_DIR/.lock" ] && [ ! -f "$JM_DIR/.lock" ]; then
    jm_log err "job $JM_JOB: $JM_DIR/.lock is not a regular file; job map not changed"
    return 1
  fi
  _fl=
  command -v flock >/dev/null 2>&1 && _fl=1
  if [ "$JM_LOCK" = mkdir ] || [ -z "$_fl" ]; then
    if [ ! -e "$JM_DIR/.lock" ]; then
      _jm_mkdir_lock || return 1
      [ -e "$JM_DIR/.lock" ] || return 0
      # a script in flock mode came meanwhile: let go, then take both in order
      _jm_unlock_dir
    fi
    if [ -z "$_fl" ]; then
      jm_log err "job $JM_JOB: flock is missing but $JM_DIR/.lock shows that the flock lock is used on this node; the two locks are not mixed: job map not changed"
      return 1
    fi
  fi
  if { command exec 9>>"$JM_DIR/.lock"; } 2>/dev/null; then
    if ! flock -w "$JM_LOCK_TIMEOUT" 9 2>/dev/null; then
      jm_log err "job $JM_JOB: $JM_DIR/.lock still held after ${JM_LOCK_TIMEOUT}s; job map not changed"
      return 1
    fi
  else
    jm_log err "job $JM_JOB: cannot write $JM_DIR (read-only?); job map not changed"
    return 1
  fi
  # a .lock.d here: a mkdir-mode holder without flock (or a dead one): wait for it as well
  [ "$JM_LOCK" = mkdir ] || [ -d "$JM_DIR/.lock.d" ] || return 0
  _jm_mkdir_lock
}

# _jm_mkdir_lock: the mkdir lock .lock.d holding the owner's pid; a waiter breaks it only when
# that pid is dead (or no pid appears for 2 s).
_jm_mkdir_lock() {
  _ld=$JM_DIR/.lock.d
  _tries=0 _nopid=0
  _max=$((JM_LOCK_TIMEOUT * 20))
  until mkdir -- "$_ld" 2>/dev/null; do
    _tries=$((_tries + 1))
    if [ ! -d "$_ld" ]; then
      # no lock there: a directory no one can write into, or one released just now (taken by
      # another job at once, when many wait: that is contention, counted below like a held lock)
      if [ ! -w "$JM_DIR" ]; then
        jm_log err "job $JM_JOB: cannot write $JM_DIR (read-only?); job map not changed"
        return 1
      fi
    else
      _pid=
      { read -r _pid <"$_ld/pid"; } 2>/dev/null
      case $_pid in
        '' | *[!0-9]*)
          # a holder between mkdir and writing its pid (or releasing): stale only if it stays so
          _nopid=$((_nopid + 1))
          [ "$_nopid" -lt 40 ] || _jm_break "$_ld" ""
          ;;
        *)
          _nopid=0
          kill -0 "$_pid" 2>/dev/null || _jm_break "$_ld" "$_pid"
          ;;
      esac
    fi
    if [ "$_tries" -gt "$_max" ]; then
      # held all along, or taken and released by other jobs in turn: held too long for this job
      jm_log err "job $JM_JOB: $_ld still held after ${JM_LOCK_TIMEOUT}s; job map not changed"
      return 1
    fi
    sleep 0.05 2>/dev/null || sleep 1
  done
  _jm_lockdir=$_ld
  printf '%s\n' "$$" >"$_ld/pid" 2>/dev/null
  return 0
}

# _jm_unlock_dir: let go of the mkdir lock.
_jm_unlock_dir() {
  rm -f -- "$_jm_lockdir/pid" 2>/dev/null
  rmdir -- "$_jm_lockdir" 2>/dev/null
  _jm_lockdir=
}

# _jm_break LOCKDIR PID: remove a lock left by a dead holder. Breakers take turns through
# LOCKDIR.break and re-read the pid inside it, so a lock taken meanwhile is never broken.
_jm_break() {
  mkdir -- "$1.break" 2>/dev/null || {
    _bpid=
    { read -r _bpid <"$1.break/pid"; } 2>/dev/null
    case $_bpid in '' | *[!0-9]*) return 0 ;; esac
    kill -0 "$_bpid" 2>/dev/null && return 0
    rm -rf -- "$1.break" 2>/dev/null
    return 0
  }
  printf '%s\n' "$$" >"$1.break/pid" 2>/dev/null
  _now=
  { read -r _now <"$1/pid"; } 2>/dev/null
  if [ "$_now" = "$2" ]; then
    rm -f -- "$1/pid" 2>/dev/null
    rmdir -- "$1" 2>/dev/null
    jm_log warning "job $JM_JOB: removed a stale lock $1 left by process ${2:-(unknown)}"
  fi
  rm -rf -- "$1.break" 2>/dev/null
  return 0
}

# jm_safe_dir DIR WHAT [THEN]: JM_SAFE, DIR's physical path, when DIR and every directory above it belong
# to root and no one else may write to them (one above may be world-writable with the sticky bit,
# as /tmp, where others cannot rename root's entries), and none has an ACL. Otherwise one log line
# naming the directory, why, and THEN (default "nothing written there"), and return 1: a root
# script never writes, or reads its settings, where another user could plant links or swap the
# directory. One ls for the whole path (POSIX long format, LC_ALL=C).
jm_safe_dir() {
  JM_SAFE='' _sw=$2 _sthen=${3:-nothing written there}
  if ! cd -P "$1" 2>/dev/null; then
    jm_log err "job $JM_JOB: cannot enter $_sw $1; $_sthen"
    return 1
  fi
  _sp=$PWD
  cd / 2>/dev/null
  set --
  _sq=$_sp
  while :; do
    set -- "$_sq" "$@"
    [ "$_sq" != / ] || break
    _sq=${_sq%/*}
    [ -n "$_sq" ] || _sq=/
  done
  _sn=$# _si=0 _sifs=$IFS
  _sout=$(ls -ldn -- "$@" 2>/dev/null) || _sout=
  IFS=$NL
  for _sl in $_sout; do
    IFS=$_sifs
    _si=$((_si + 1))
    # mode, links, uid, gid, size, 3 date fields, name: the name is what is left after 8 fields
    _sm=${_sl%% *} _sr=${_sl#* } _su=
    for _sf in 1 2 3 4 5 6 7; do
      _sr=${_sr#"${_sr%%[! ]*}"}
      [ "$_sf" != 2 ] || _su=${_sr%% *}
      _sr=${_sr#* }
    done
    _sr=${_sr#"${_sr%%[! ]*}"}
    _why=
    case $_sm in d*) ;; *) _why='is not a directory' ;; esac
    [ -n "$_why" ] || [ "$_su" = 0 ] || _why="belongs to uid $_su, not root"
    if [ -z "$_why" ]; then
      # ls lists the shortest name first: the last line is DIR itself, never to be shared
      case $_si:$_sm in
        "$_sn":?????w* | "$_sn":????????w*) _why='is writable by its group or by others' ;;
        *:?????????[tT]*) ;;
        *:?????w* | *:????????w*) _why='is writable by its group or by others (and not sticky)' ;;
        *:??????????+*) _why='has an ACL (others may write to it)' ;;
      esac
    fi
    if [ -n "$_why" ]; then
      if [ "$_si" = "$_sn" ]; then
        jm_log err "job $JM_JOB: $_sw $_sp $_why; $_sthen"
      else
        jm_log err "job $JM_JOB: $_sw $_sp not used: $_sr above it $_why; $_sthen"
      fi
      return 1
    fi
    IFS=$NL
  done
  IFS=$_sifs
  if [ "$_si" -ne "$_sn" ]; then
    jm_log err "job $JM_JOB: cannot list $_sw $_sp and the directories above it; $_sthen"
    return 1
  fi
  JM_SAFE=$_sp
  return 0
}

# jm_textfile_path: JM_TEXTFILE, this job's node_exporter textfile.
jm_textfile_path() {
  JM_TEXTFILE=$JM_TEXTFILE_DIR/slurm_job_$JM_JOB.prom
}
# ---- vigil-jobmap common: end ----

# jm_dir DIR: make sure DIR exists (created 0755 if missing).
jm_dir() {
  [ -d "$1" ] && return 0
  # shellcheck disable=SC2174 # parents get 0755 from the umask as well
  if mkdir -p -m 0755 -- "$1" 2>/dev/null; then
    jm_log notice "job $JM_JOB: created the missing directory $1"
    return 0
  fi
  jm_log err "job $JM_JOB: $1 is missing and cannot be created; nothing written there"
  return 1
}

# jm_gpus: JM_GPUS, the job's GPUs as job map file names ("0", "3", MIG "1.2"), from
# SLURM_JOB_GPUS (e.g. "0,1" or "0-3"), else CUDA_VISIBLE_DEVICES. Returns 1 if the list is not
# made of GPU indices (JM_GPUS then empty); JM_GPUS_FROM names the variable used.
jm_gpus() {
  JM_GPUS='' JM_GPUS_FROM=SLURM_JOB_GPUS
  _src=${SLURM_JOB_GPUS:-}
  if [ -z "$_src" ]; then
    JM_GPUS_FROM=CUDA_VISIBLE_DEVICES
    _src=${CUDA_VISIBLE_DEVICES:-}
  fi
  case $_src in NoDevFiles) return 0 ;; *[!0-9.,\ -]*) return 1 ;; esac
  [ "${#_src}" -le 4096 ] || return 1
  _n=0
  _ifs=$IFS
  IFS=,
  for _t in $_src; do
    IFS=$_ifs
    _t=${_t#"${_t%%[! ]*}"}
    _t=${_t%"${_t##*[! ]}"}
    case $_t in
      '') continue ;;
      *[!0-9]*-* | *-*[!0-9]* | *.*.* | *.*-* | *-*.* | .* | *. | -* | *-) JM_GPUS=''; return 1 ;;
      *-*)
        _jm_num "${_t%-*}" || { JM_GPUS=''; return 1; }
        _a=$_jm_n
        _jm_num "${_t#*-}" || { JM_GPUS=''; return 1; }
        _b=$_jm_n
        if [ "$_a" -gt "$_b" ] || [ $((_b - _a)) -ge 1024 ]; then JM_GPUS=''; return 1; fi
        while [ "$_a" -le "$_b" ]; do
          _jm_add "$_a" || return 1
          _a=$((_a + 1))
        done
        ;;
      *.*)
        _jm_num "${_t%.*}" || { JM_GPUS=''; return 1; }
        _a=$_jm_n
        _jm_num "${_t#*.}" || { JM_GPUS=''; return 1; }
        _jm_add "$_a.$_jm_n" || return 1
        ;;
      *)
        _jm_num "$_t" || { JM_GPUS=''; return 1; }
        _jm_add "$_jm_n" || return 1
        ;;
    esac
  done
  IFS=$_ifs
  return 0
}

# jm_gres_map: JM_GRES, Slurm's GPU index -> job map file name (" 0=0.1 1=0.2 2=1"), from the GRES
# map JM_GRES_MAP that the role writes from slurm_jobmap_gres_devices on nodes with MIG: one
# "<Slurm GPU index> <gpu>[.<GPU instance id>]" a line, # comments and blank lines ignored. Slurm
# hands a prolog MIG slices as plain GRES indices; dcgm-exporter tags a MIG instance's series only
# from the file <gpu>.<GPU instance id>. No file (or one without entries): Slurm's indices are GPU
# indices, JM_GRES empty. The file must be a regular file of root's that no one else may write, in a
# dir only root can change, and every line must parse (each index once; a name may repeat: the
# compute instances of one GPU instance are separate Slurm devices, one job map file); otherwise
# one log line and return 1, and the caller maps no GPU: a wrong map would tag other jobs' series.
jm_gres_map() {
  JM_GRES=''
  [ -e "$JM_GRES_MAP" ] || [ -h "$JM_GRES_MAP" ] || return 0
  _gf=${JM_GRES_MAP##*/} _gd=${JM_GRES_MAP%/*}
  jm_safe_dir "${_gd:-/}" 'the GRES map dir' 'no GPU mapped' || return 1
  _gp=${JM_SAFE%/}/$_gf
  _gl=$(ls -ldn -- "$_gp" 2>/dev/null) || _gl=
  # shellcheck disable=SC2086 # split into ls's fields on purpose (globbing is off)
  set -- $_gl
  case ${1:-}:${3:-} in
    -????[!w]??[!w]?:0 | -????[!w]??[!w]?.:0) ;;
    *)
      jm_log err "job $JM_JOB: the GRES map $_gp is not a regular file that only root can write (a link, another owner, group- or world-writable, or an ACL); no GPU mapped"
      return 1
      ;;
  esac
  _gn=0 _ln=0 _gbad=''
  while IFS= read -r _l || [ -n "$_l" ]; do
    _ln=$((_ln + 1))
    case $_l in '' | '#'*) continue ;; esac
    # shellcheck disable=SC2086 # split into fields on purpose (globbing is off)
    set -- $_l
    _gbad=$_ln
    [ $# -eq 2 ] || break
    _jm_num "$1" || break
    _gi=$_jm_n
    case $2 in
      *.*.* | .* | *.) break ;;
      *.*)
        _jm_num "${2%.*}" || break
        _gg=$_jm_n
        _jm_num "${2#*.}" || break
        _gg=$_gg.$_jm_n
        ;;
      *)
        _jm_num "$2" || break
        _gg=$_jm_n
        ;;
    esac
    case "$JM_GRES " in *" $_gi="*) break ;; esac
    _gn=$((_gn + 1))
    [ "$_gn" -le 1024 ] || break
    JM_GRES="$JM_GRES $_gi=$_gg"
    _gbad=''
  done <"$_gp" 2>/dev/null
  [ -n "$_gbad" ] || return 0
  JM_GRES=''
  jm_log err "job $JM_JOB: line $_gbad of the GRES map $_gp is not \"<Slurm GPU index> <gpu>[.<GPU instance id>]\" (or repeats an index); no GPU mapped"
  return 1
}

# jm_gres_apply: JM_GPUS with each Slurm GPU index replaced by its job map file name from JM_GRES
# (names given as <gpu>.<instance> already stay); indices the map lacks are left out and listed in
# JM_GRES_MISSING.
jm_gres_apply() {
  JM_GRES_MISSING=''
  [ -n "$JM_GRES" ] || return 0
  _go=''
  for _g in $JM_GPUS; do
    case $_g in
      *.*) _gr=$_g ;;
      *)
        case "$JM_GRES " in
          *" $_g="*)
            _gr=${JM_GRES#*" $_g="}
            _gr=${_gr%% *}
            ;;
          *)
            JM_GRES_MISSING="$JM_GRES_MISSING $_g"
            continue
            ;;
        esac
        ;;
    esac
    case " $_go " in *" $_gr "*) ;; *) _go=${_go:+$_go }$_gr ;; esac
  done
  JM_GPUS=$_go
}

# _jm_num DIGITS: _jm_n, DIGITS without leading zeros (at most 4 digits: GPU and MIG indices).
_jm_num() {
  case $1 in '' | *[!0-9]* | ?????*) return 1 ;; esac
  _jm_n=$1
  while :; do
    case $_jm_n in 0?*) _jm_n=${_jm_n#0} ;; *) break ;; esac
  done
  return 0
}

# _jm_add NAME: append NAME to JM_GPUS once (at most 1024 GPUs a job on one node).
_jm_add() {
  case " $JM_GPUS " in *" $1 "*) return 0 ;; esac
  _n=$((_n + 1))
  if [ "$_n" -gt 1024 ]; then
    JM_GPUS=''
    return 1
  fi
  JM_GPUS=${JM_GPUS:+$JM_GPUS }$1
  return 0
}

# Label values are cut to this many bytes before escaping (a Slurm user or account is far shorter).
_JM_LABEL_MAX=256

# _jm_subst STRING FIND REPLACE: _jm_s, STRING with every FIND (literal) replaced.
_jm_subst() {
  _s=$1 _jm_s=''
  while :; do
    case $_s in *"$2"*) ;; *) break ;; esac
    _jm_s=$_jm_s${_s%%"$2"*}$3
    _s=${_s#*"$2"}
  done
  _jm_s=$_jm_s$_s
}

# jm_label VALUE: _jm_lv, VALUE as a Prometheus label value: at most _JM_LABEL_MAX bytes, valid
# UTF-8 (invalid bytes dropped), with backslash, double quote and line feed escaped.
jm_label() {
  _jm_lv=$1
  if [ "${#_jm_lv}" -gt "$_JM_LABEL_MAX" ]; then
    # printf's precision cuts bytes in linear time (pattern cuts are quadratic on long values)
    _jm_lv=$(printf "%.${_JM_LABEL_MAX}s_" "$_jm_lv")
    _jm_lv=${_jm_lv%_}
  fi
  case $_jm_lv in
    *[!\ -~]*)
      # not plain printable ASCII: keep valid UTF-8 only (the _ keeps trailing line feeds)
      if command -v iconv >/dev/null 2>&1; then
        _jm_lv=$(printf '%s_' "$_jm_lv" | iconv -c -f UTF-8 -t UTF-8 2>/dev/null)
        _jm_lv=${_jm_lv%_}
      else
        _jm_ascii "$_jm_lv"
      fi
      ;;
  esac
  case $_jm_lv in
    *\\* | *\"* | *"$NL"*)
      # shellcheck disable=SC1003 # a lone backslash, not an escaped quote
      _jm_subst "$_jm_lv" '\' '\\'
      _jm_subst "$_jm_s" '"' '\"'
      _jm_subst "$_jm_s" "$NL" '\n'
      _jm_lv=$_jm_s
      ;;
  esac
}

# _jm_ascii VALUE: _jm_lv, VALUE with every byte outside tab, line feed and printable ASCII as "?"
# (only where iconv is missing).
_jm_ascii() {
  _s=$1 _jm_lv=''
  while [ -n "$_s" ]; do
    _r=${_s#?}
    _c=${_s%"$_r"}
    case $_c in
      [\ -~] | "$NL" | '	') _jm_lv=$_jm_lv$_c ;;
      *) _jm_lv="$_jm_lv?" ;;
    esac
    _s=$_r
  done
}

# jm_map_add: add JM_JOB to the job map file of each GPU in JM_GPUS (under the lock).
jm_map_add() {
  _stage=$JM_DIR/.stage
  if [ -h "$_stage" ] || { [ -e "$_stage" ] && [ ! -d "$_stage" ]; }; then
    jm_log err "job $JM_JOB: $_stage is a symbolic link or not a directory, not followed; job map not changed"
    return 1
  fi
  if [ ! -d "$_stage" ] && ! mkdir -m 0755 -- "$_stage" 2>/dev/null; then
    jm_log err "job $JM_JOB: cannot write $JM_DIR (read-only or full?); job map not changed"
    return 1
  fi
  set --
  for _g in $JM_GPUS; do
    _c='' _have=''
    if [ -h "$JM_DIR/$_g" ]; then
      # never read through a link (its target's lines would land in the map): replaced below
      jm_log warning "job $JM_JOB: $JM_DIR/$_g was a symbolic link, not followed; replaced"
    elif [ -f "$JM_DIR/$_g" ]; then
      while IFS= read -r _l || [ -n "$_l" ]; do
        case $_l in
          '') continue ;;
          "$JM_JOB") _have=1 ;;
        esac
        _c=$_c$_l$NL
      done <"$JM_DIR/$_g" 2>/dev/null
    fi
    [ -z "$_have" ] || continue
    # left by a killed run (or planted): removed, never followed; noclobber creates the file anew
    if [ -e "$_stage/$_g" ] || [ -h "$_stage/$_g" ]; then rm -f -- "$_stage/$_g" 2>/dev/null; fi
    if ! printf '%s%s\n' "$_c" "$JM_JOB" 2>/dev/null >"$_stage/$_g"; then
      [ $# -eq 0 ] || rm -f -- "$@" 2>/dev/null
      rm -f -- "$_stage/$_g" 2>/dev/null
      jm_log err "job $JM_JOB: cannot write $_stage (full or read-only?); job map not changed"
      return 1
    fi
    set -- "$@" "$_stage/$_g"
  done
  [ $# -gt 0 ] || return 0
  if ! mv -f -- "$@" "$JM_DIR/" 2>/dev/null; then
    rm -f -- "$@" 2>/dev/null
    jm_log err "job $JM_JOB: cannot rename into $JM_DIR; job map may lack GPUs $JM_GPUS"
    return 1
  fi
  return 0
}

# jm_textfile_write: this job's slurm_job_info textfile, written whole then renamed.
jm_textfile_write() {
  jm_dir "$JM_TEXTFILE_DIR" || return 1
  jm_safe_dir "$JM_TEXTFILE_DIR" 'the textfile dir' || return 1
  JM_TEXTFILE_DIR=$JM_SAFE
  jm_textfile_path
  jm_label "${SLURM_JOB_USER:-}"
  _u=$_jm_lv
  jm_label "${SLURM_JOB_ACCOUNT:-}"
  _a=$_jm_lv
  jm_label "${SLURM_JOB_PARTITION:-}"
  _p=$_jm_lv
  _node=${SLURMD_NODENAME:-}
  if [ -z "$_node" ]; then
    { read -r _node </proc/sys/kernel/hostname; } 2>/dev/null || _node=
  fi
  jm_label "$_node"
  # a new file under a name of this process (noclobber): one left by a killed run, or planted,
  # is removed, never followed
  _tmp=$JM_TEXTFILE_DIR/.slurm_job_$JM_JOB.prom.tmp.$$
  if [ -e "$_tmp" ] || [ -h "$_tmp" ]; then rm -f -- "$_tmp" 2>/dev/null; fi
  if printf '%s\n%s\n%s{hpc_job="%s",user="%s",account="%s",partition="%s",node="%s"} 1\n' \
    '# HELP slurm_job_info Slurm job on this node (vigil prolog); the value is always 1.' \
    '# TYPE slurm_job_info gauge' slurm_job_info "$JM_JOB" "$_u" "$_a" "$_p" "$_jm_lv" \
    2>/dev/null >"$_tmp" && mv -f -- "$_tmp" "$JM_TEXTFILE" 2>/dev/null; then
    return 0
  fi
  rm -f -- "$_tmp" 2>/dev/null
  jm_log err "job $JM_JOB: cannot write $JM_TEXTFILE (full or read-only?)"
  return 1
}

# 1 settings and job id: without a job id nothing is written
jm_config || exit 0
if ! jm_jobid; then
  jm_log err "SLURM_JOB_ID is missing or not a job id; nothing written"
  exit 0
fi
jm_textfile_path

# 2 the job map: only GPUs named by index (Slurm's, through the GRES map where MIG is used);
#   anything else in the list is logged, never written
if ! jm_gpus; then
  jm_log warning "job $JM_JOB: $JM_GPUS_FROM is not a list of GPU indices; no GPU mapped"
elif [ -z "$JM_GPUS" ]; then
  jm_log info "job $JM_JOB: no GPUs (SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES empty); no GPU mapped"
elif jm_gres_map; then
  jm_gres_apply
  if [ -n "$JM_GRES_MISSING" ]; then
    jm_log warning "job $JM_JOB: Slurm GPU index(es)$JM_GRES_MISSING not in the GRES map $JM_GRES_MAP; not mapped"
  fi
  if [ -n "$JM_GPUS" ] && jm_dir "$JM_DIR" && jm_safe_dir "$JM_DIR" 'the job map dir'; then
    JM_DIR=$JM_SAFE
    jm_lock && jm_map_add
  fi
fi

# 3 the job's info for node_exporter
jm_textfile_write
exit 0
