# Runs queued commands a few at a time: each one's output goes to a file of its own and is printed
# whole when it ends, so lanes never interleave. Sourced by test.sh and soak.sh.
#
#   lane_job NAME DIR CMD...    queue CMD, run in DIR
#   LANE_GROUP=G lane_job ...   the same, never beside another command of group G (they share a
#                               server that slows down under load: its timings would slip)
#   lane_alone NAME DIR CMD...  queue CMD to run after the others, by itself (it stops a shared
#                               server, so nothing else may use that server meanwhile)
#   lane_run LANES              run the queue, each command as soon as a lane (and its group) is
#                               free, in the order queued; fails when any failed, after all ran
#
# After lane_run, LANE_LOGS names a file holding every command's output, in the order they ended,
# and LANE_PASSED_NAMES and LANE_FAILED_NAMES the commands that passed and failed.

lane_names=() lane_dirs=() lane_cmds=() lane_flags=() lane_groups=()
LANE_LOGS=""
LANE_PASSED_NAMES=() LANE_FAILED_NAMES=()

lane_job() { # name dir cmd...
  lane_names+=("$1") lane_dirs+=("$2") lane_flags+=(shared) lane_groups+=("${LANE_GROUP:-}")
  lane_cmds+=("$(printf '%q ' "${@:3}")")
}

lane_alone() { # name dir cmd...
  lane_names+=("$1") lane_dirs+=("$2") lane_flags+=(alone) lane_groups+=("")
  lane_cmds+=("$(printf '%q ' "${@:3}")")
}

lane_run() { # lanes
  local lanes=$1 folder i running=0
  folder=$(mktemp -d "${TMPDIR:-/tmp}/hermes-lanes.XXXXXX")
  LANE_LOGS="$folder/all.log"
  : >"$LANE_LOGS"
  declare -A job_of=() started_at=() busy_groups=()

  lane_finish() { # pid status
    local job=${job_of[$1]} took
    took=$(($(date +%s) - started_at[$1]))
    cat "$folder/$job.log" >>"$LANE_LOGS"
    cat "$folder/$job.log"
    if [ "$2" -eq 0 ]; then
      LANE_PASSED_NAMES+=("${lane_names[$job]}")
      printf '\n-- %s: passed in %ss\n' "${lane_names[$job]}" "$took"
    else
      LANE_FAILED_NAMES+=("${lane_names[$job]}")
      printf '\n-- %s: FAILED (exit %s) in %ss\n' "${lane_names[$job]}" "$2" "$took"
    fi
    unset "job_of[$1]"
    [ -z "${lane_groups[$job]}" ] || unset "busy_groups[${lane_groups[$job]}]"
    running=$((running - 1))
  }

  lane_wait_one() {
    local status=0 done_pid
    wait -n -p done_pid "${!job_of[@]}" || status=$?
    lane_finish "$done_pid" "$status"
  }

  lane_start() { # job
    (cd "${lane_dirs[$1]}" && eval "${lane_cmds[$1]}") >"$folder/$1.log" 2>&1 </dev/null &
    job_of[$!]=$1
    [ -z "${lane_groups[$1]}" ] || busy_groups[${lane_groups[$1]}]=1
    started_at[$!]=$(date +%s)
    running=$((running + 1))
  }

  local pass width pending next
  for pass in shared alone; do
    width=$lanes
    [ "$pass" = alone ] && width=1
    pending=()
    for i in "${!lane_names[@]}"; do
      [ "${lane_flags[$i]}" = "$pass" ] && pending+=("$i")
    done
    while [ "${#pending[@]}" -gt 0 ]; do
      next=""
      if [ "$running" -lt "$width" ]; then
        for i in "${!pending[@]}"; do
          local group=${lane_groups[${pending[$i]}]}
          if [ -z "$group" ] || [ -z "${busy_groups[$group]:-}" ]; then
            next=$i
            break
          fi
        done
      fi
      if [ -z "$next" ]; then
        lane_wait_one
        continue
      fi
      lane_start "${pending[$next]}"
      unset "pending[$next]"
      pending=("${pending[@]}")
    done
    while [ "$running" -gt 0 ]; do lane_wait_one; done
  done

  lane_names=() lane_dirs=() lane_cmds=() lane_flags=() lane_groups=()
  if [ "${#LANE_FAILED_NAMES[@]}" -gt 0 ]; then
    printf '\nFAILED:' >&2
    printf ' [%s]' "${LANE_FAILED_NAMES[@]}" >&2
    printf '\n' >&2
    return 1
  fi
}
