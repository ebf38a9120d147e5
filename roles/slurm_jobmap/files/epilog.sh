#!/bin/sh
# vigil-jobmap epilog (Slurm Epilog, runs as root on the GPU node after the job ends).
#
# 1. Remove this job's lines (exact match: job 12 never removes 123) from every job map file in
#    the job map dir, so a GPU list that differs from the prolog's cannot leave a stale line;
#    a file left without lines stays, empty (dcgm-exporter reads an empty file as "no job"), and is
#    never removed: dcgm-exporter fails its whole scrape (HTTP 500) when a file it has just listed
#    is gone when it opens it.
# 2. Remove <textfile dir>/slurm_job_<job id>.prom.
#
# Changes go to a new file (noclobber) in the same directory and are renamed into place under the
# node-wide lock the prolog takes too; a job map dir that anyone but root could change is left
# alone (one log line). Always exits 0; problems are logged to syslog with the tag
# vigil-jobmap. Settings as in prolog.sh (/etc/vigil/jobmap.conf, VIGIL_JOBMAP_DIR,
# VIGIL_TEXTFILE_DIR, VIGIL_JOBMAP_LOCK_TIMEOUT, VIGIL_JOBMAP_LOCK); see docs/jobmap.md.

JM_PHASE=epilog

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

# jm_map_remove: drop JM_JOB's lines from every GPU file of the job map (under the lock). A file
# left without lines is replaced by an empty one, by the same rename as the others: the name never
# disappears, so a dcgm-exporter scrape that has just listed the dir can always open it. The
# textfile goes with one rm.
jm_map_remove() {
  _stage=$JM_DIR/.stage
  _mv=''
  set +f
  for _f in "$JM_DIR"/*; do
    _g=${_f##*/}
    case $_g in '' | *[!0-9.]*) continue ;; esac
    [ ! -h "$_f" ] || continue
    [ -f "$_f" ] || continue
    _c='' _hit=''
    while IFS= read -r _l || [ -n "$_l" ]; do
      case $_l in
        '') continue ;;
        "$JM_JOB") _hit=1 && continue ;;
      esac
      _c=$_c$_l$NL
    done <"$_f" 2>/dev/null
    [ -n "$_hit" ] || continue
    if [ -h "$_stage" ] || { [ -e "$_stage" ] && [ ! -d "$_stage" ]; }; then
      jm_log err "job $JM_JOB: $_stage is a symbolic link or not a directory, not followed; its lines stay in GPUs$_mv $_g"
      set -f
      return 1
    fi
    if [ ! -d "$_stage" ] && ! mkdir -m 0755 -- "$_stage" 2>/dev/null; then
      jm_log err "job $JM_JOB: cannot write $JM_DIR (read-only or full?); its lines stay in GPUs$_mv $_g"
      set -f
      return 1
    fi
    # left by a killed run (or planted): removed, never followed; noclobber creates the file anew
    if [ -e "$_stage/$_g" ] || [ -h "$_stage/$_g" ]; then rm -f -- "$_stage/$_g" 2>/dev/null; fi
    if ! printf '%s' "$_c" 2>/dev/null >"$_stage/$_g"; then
      rm -f -- "$_stage/$_g" 2>/dev/null
      jm_log err "job $JM_JOB: cannot write $_stage (full or read-only?); its line stays in GPU $_g"
      continue
    fi
    _mv="$_mv $_g"
  done
  set -f
  if [ -n "$_mv" ]; then
    set --
    for _g in $_mv; do set -- "$@" "$_stage/$_g"; done
    if ! mv -f -- "$@" "$JM_DIR/" 2>/dev/null; then
      rm -f -- "$@" 2>/dev/null
      jm_log err "job $JM_JOB: cannot rename into $JM_DIR; its lines may stay in GPUs$_mv"
    fi
  fi
  return 0
}

# jm_textfile_remove: this job's textfile (rm never follows a link).
jm_textfile_remove() {
  [ -e "$JM_TEXTFILE" ] || return 0
  rm -f -- "$JM_TEXTFILE" 2>/dev/null && return 0
  jm_log err "job $JM_JOB: cannot remove $JM_TEXTFILE (read-only?)"
  return 1
}

# 1 settings and job id: without a job id nothing is removed
jm_config || exit 0
if ! jm_jobid; then
  jm_log err "SLURM_JOB_ID is missing or not a job id; nothing removed"
  exit 0
fi
jm_textfile_path

# 2 the job map (all of it: the epilog's GPU list is not trusted to match the prolog's)
if [ -d "$JM_DIR" ] && jm_safe_dir "$JM_DIR" 'the job map dir'; then
  JM_DIR=$JM_SAFE
  jm_lock && jm_map_remove
fi

# 3 the job's textfile
jm_textfile_remove
exit 0
