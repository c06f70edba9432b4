#!/bin/sh
# row-fence guard for Claude Code: the shim around row-fence-guard, the PreToolUse hook
# for the Bash tool.
#
# row-fence-guard does the work: it parses the command with a real bash parser, binds the
# session to its lane's descriptor, asks the row fence about every fenced write and (for a
# row-bound session) every opaque command, prints the verdict lines and exits 0 (the
# command runs) or 2 (Claude Code blocks it; any other exit would let it run). This shim
# keeps the two states only a parent can see:
#
#   NEVER RAN       the guard is missing, not executable, or was killed before it asked:
#                   exit 2 when this lane visibly has a descriptor (ROW_FENCE_DESCRIPTOR,
#                   the session's binding, or a descriptor the asker's walk finds from the
#                   hook's cwd); else exit 0 with a loud warning (not row-bound: the
#                   instrument is broken, which is not the answer "no")
#   CUT OFF MID-ASK the guard died while $ROW_FENCE_HOME/guard/asking.<pid> said it was
#                   asking: exit 2, "retry"
#
# `row-fence install claude-hook` writes the settings entry so that the normal path execs
# the guard alone and this shim runs only when the guard exited neither 0 nor 2:
#
#   export ROW_FENCE_BIN_DIR=… ROW_FENCE_HOME=…; '…/row-fence-guard'; s=$?;
#   case $s in 0|2) exit $s;; esac; sh '…/guard-bash.sh' --guard-exit $s --guard-parent $$ || exit 2
#
# Run on its own (no arguments, the hook JSON on stdin) it runs the guard itself and
# keeps the same states. Environment:
#   ROW_FENCE_BIN_DIR      where row-fence-guard is (before PATH); set by the installer
#   ROW_FENCE_HOME         bindings, markers, the daemon's socket (default ~/.row-fence)
#   ROW_FENCE_DESCRIPTOR   an explicit descriptor (the session is row-bound)
# POSIX sh and the base system's tools only (sed, head, dirname, tr, rm): it runs under
# `env -i PATH=/usr/bin:/bin`, on Linux and macOS.

LC_ALL=C
export LC_ALL

say() {
  printf '%s\n' "$*" >&2
}

home=${ROW_FENCE_HOME:-}
[ -n "$home" ] || { [ -n "${HOME:-}" ] && home=$HOME/.row-fence; }

status=""
parent=$$
while [ $# -gt 0 ]; do
  case $1 in
    --guard-exit) status=$2; shift 2 ;;
    --guard-parent) parent=$2; shift 2 ;;
    *) say "row-fence guard: unknown argument $1"; exit 2 ;;
  esac
done

# The hook input, when the guard did not consume it (it never started), for the cwd and
# the session the fallback needs. Read only here, off the normal path.
input=""
read_input() {
  [ -t 0 ] && return
  input=$(head -c 8388608 2>/dev/null | tr '\n' ' ')
}

# A JSON string member of the hook input, when it holds no escapes (a UUID, a path).
member() {
  printf '%s' "$input" | sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\\([^\"\\\\]*\\)\".*/\\1/p" | head -n 1
}

# True when $1 looks like a git dir, as git (and the asker) tell one: a HEAD file and an
# objects directory (a repository) or a commondir file (a linked worktree's git dir).
is_git_dir() {
  [ -f "$1/HEAD" ] && { [ -d "$1/objects" ] || [ -f "$1/commondir" ]; }
}

# Prints the descriptor path of git dir $1 when one is there (any file, a directory, a
# dangling symlink: a descriptor that cannot be read still binds the lane), else the
# superproject's when $1 is a submodule's git dir (<super git dir>/modules/<name>, names
# may hold /), and so on outward; fails when none of them has one.
in_git_dir() {
  g=$1
  n=0
  while [ "$n" -lt 64 ]; do
    if [ -e "$g/row-fence.json" ] || [ -h "$g/row-fence.json" ]; then
      printf '%s\n' "$g/row-fence.json"
      return 0
    fi
    # The nearest ancestor named modules whose parent is a git dir, from the git dir's
    # physical path (a gitdir: file names it as ../.git/modules/x).
    a=$(cd "$g" 2>/dev/null && pwd -P) || return 1
    g=""
    while [ "$a" != / ] && [ -n "$a" ]; do
      a=$(dirname "$a")
      if [ "${a##*/}" = modules ] && is_git_dir "$(dirname "$a")"; then
        g=$(dirname "$a")
        break
      fi
    done
    [ -n "$g" ] || return 1
    n=$((n + 1))
  done
  return 1
}

# Prints the descriptor a lane in $1 visibly has; fails when there is none. The asker's
# rule (row_fence_contract::descriptor::resolve, which tests/e2e/shim_walk.rs holds this
# walk to): ROW_FENCE_DESCRIPTOR, else the session's binding, else walking up from $1 to
# each git dir as git finds it (a .git directory, a .git file's gitdir:, or a bare git
# dir), whose descriptor (or a superproject's) decides; a repository without one does not
# stop the walk, which goes on to the worktrees around it. A .git that leads nowhere is
# printed itself: the lane cannot be told unbound.
visible_descriptor() {
  if [ -n "${ROW_FENCE_DESCRIPTOR:-}" ]; then
    printf '%s\n' "$ROW_FENCE_DESCRIPTOR"
    return 0
  fi
  if [ -n "$session" ] && [ -n "$home" ] && [ -e "$home/sessions/$session.json" ]; then
    printf '%s\n' "$home/sessions/$session.json"
    return 0
  fi
  d=$1
  while [ -n "$d" ]; do
    gitdir=""
    if [ -d "$d/.git" ]; then
      gitdir=$d/.git
    elif [ -f "$d/.git" ]; then
      gitdir=$(sed -n 's/^gitdir:[[:space:]]*//p' "$d/.git" 2>/dev/null | head -n 1 | sed 's/[[:space:]]*$//')
      case $gitdir in
        '') printf '%s\n' "$d/.git"; return 0 ;; # no gitdir: line: cannot tell, so bound
        /*) ;;
        *) gitdir=$d/$gitdir ;;
      esac
      [ -d "$gitdir" ] || { printf '%s\n' "$d/.git"; return 0; } # a broken worktree
    elif [ -e "$d/.git" ]; then
      printf '%s\n' "$d/.git" # neither a directory nor a file (a FIFO): never read it
      return 0
    elif is_git_dir "$d"; then
      gitdir=$d
    fi
    if [ -n "$gitdir" ] && in_git_dir "$gitdir"; then
      return 0
    fi
    [ "$d" = / ] && return 1
    d=$(dirname "$d")
  done
  return 1
}

fallback() {
  marker=""
  [ -n "$home" ] && marker=$home/guard/asking.$parent
  if [ -n "$marker" ] && [ -e "$marker" ]; then
    rm -f "$marker"
    say "row-fence guard: the fence was cut off mid-ask (row-fence-guard exit $status, no verdict); retry. The command did not run."
    exit 2
  fi
  read_input
  session=$(member session_id)
  # Cursor names the session conversation_id.
  [ -n "$session" ] || session=$(member conversation_id)
  cwd=$(member cwd)
  [ -n "$cwd" ] || cwd=$(pwd)
  why="row-fence-guard exited $status without a verdict"
  case $status in
    126) why="row-fence-guard is not executable ($1)" ;;
    127) why="row-fence-guard was not found ($1)" ;;
  esac
  if descriptor=$(visible_descriptor "$cwd"); then
    say "row-fence guard: the fence never ran ($why), and this lane is row-bound ($descriptor): denied. The command did not run."
    exit 2
  fi
  say "row-fence guard: WARNING: the fence never ran ($why). No descriptor is visible from $cwd, so this session is taken as not row-bound and the command runs UNFENCED. Fix the row-fence install."
  exit 0
}

if [ -n "${ROW_FENCE_BIN_DIR:-}" ] && { [ -e "${ROW_FENCE_BIN_DIR}/row-fence-guard" ] || [ -h "${ROW_FENCE_BIN_DIR}/row-fence-guard" ]; }; then
  guard=${ROW_FENCE_BIN_DIR}/row-fence-guard
else
  guard=$(command -v row-fence-guard 2>/dev/null) || guard=""
fi
where=${guard:-"in neither ROW_FENCE_BIN_DIR (${ROW_FENCE_BIN_DIR:-unset}) nor PATH"}

if [ -z "$status" ]; then
  if [ -z "$guard" ]; then
    status=127
  else
    "$guard"
    status=$?
    case $status in
      0 | 2) exit "$status" ;;
    esac
  fi
fi
fallback "$where"
