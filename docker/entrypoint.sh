#!/bin/bash
# The image's entrypoint. It keeps the official mongo image's conventions, so that its users'
# habits and compose files carry over (docs/DOCKER.md):
#   - a first argument starting with "-" is an option for cairn: `docker run IMAGE --quiet`;
#   - any other program is run as given: `docker run -it IMAGE bash`;
#   - for cairn itself (the default command): listen on every address and serve /data/db unless
#     the arguments say otherwise; started as root, hand the data directory to the cairn user and
#     go on as that user; with MONGO_INITDB_ROOT_USERNAME/_PASSWORD (or _FILE), serve with
#     --auth; on a fresh data directory, create that root user and run
#     /docker-entrypoint-initdb.d/* once against a temporary server bound to 127.0.0.1; then
#     exec cairn, which becomes PID 1 and gets `docker stop`'s SIGTERM itself.
# cairn logs to stderr; the server's output is sent to stdout, where mongod writes its log. This
# script's own messages go to stderr, so `--log-format json` leaves stdout pure JSON.
set -euo pipefail

# CAIRN_INITDB_DIR moves the scripts' directory, for tests outside Docker.
initdb_dir=${CAIRN_INITDB_DIR:-/docker-entrypoint-initdb.d}
# The temporary server's port (loopback only); CAIRN_INITDB_PORT moves it for tests outside Docker.
initdb_port=${CAIRN_INITDB_PORT:-27017}
initdb_start_wait_s=30
user=cairn

log() { echo "docker-entrypoint: $*" >&2; }

# has_opt NAME... -- ARGS: true when one of the options --NAME (or --NAME=value) is in ARGS.
has_opt() {
    local names=() a n
    while [ "$1" != -- ]; do names+=("$1"); shift; done
    shift
    for a in "$@"; do
        for n in "${names[@]}"; do
            case $a in "--$n" | "--$n="*) return 0 ;; esac
        done
    done
    return 1
}

# opt_value NAME ARGS: the value of the last --NAME VALUE or --NAME=VALUE in ARGS.
opt_value() {
    local name=$1 value=""
    shift
    while [ $# -gt 0 ]; do
        case $1 in
            "--$name") value=${2:-}; [ $# -lt 2 ] || shift ;;
            "--$name="*) value=${1#*=} ;;
        esac
        shift
    done
    printf '%s' "$value"
}

# config_path ARGS: the file of -f FILE, --config FILE or --config=FILE in ARGS, if any.
config_path() {
    local value=""
    while [ $# -gt 0 ]; do
        case $1 in
            -f | --config) value=${2:-}; [ $# -lt 2 ] || shift ;;
            --config=*) value=${1#*=} ;;
        esac
        shift
    done
    printf '%s' "$value"
}

# config_value FILE KEY: the value of the first `KEY: value` line (KEY: a plain name) of the YAML file (mongod's
# layout names dbPath and bindIp once), quotes and comments taken off; fails when there is none.
config_value() {
    [ -n "$1" ] && [ -r "$1" ] || return 1
    sed -n "s/^[[:space:]]*$2:[[:space:]]*\([^#]*\).*/\1/p" "$1" | head -n 1 |
        sed "s/[[:space:]]*\$//; s/^[\"']//; s/[\"']\$//" | grep .
}

# --- Authentication: MONGO_INITDB_ROOT_* -------------------------------------------------------
# As the official image: MONGO_INITDB_ROOT_USERNAME and _PASSWORD (or their _FILE variants, which
# name a file such as a Docker secret) create a root user in admin on the first start, and from
# then on the server always runs with --auth. The user is made through the localhost exception
# of the temporary server, which runs with --auth too, so initdb scripts run as they will later.

# file_env VAR: VAR itself, or the contents of the file VAR_FILE names (both set is an error).
file_env() {
    local var=$1 file_var="${1}_FILE"
    if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then
        log "both $var and $file_var are set (but are exclusive)"
        exit 1
    fi
    if [ -n "${!file_var:-}" ]; then
        if ! [ -r "${!file_var}" ]; then
            log "$file_var names ${!file_var}, which $(id -un) cannot read"
            exit 1
        fi
        export "$var"="$(<"${!file_var}")"
        unset "$file_var"
    fi
}

root_user=""
read_auth_variables() {
    file_env MONGO_INITDB_ROOT_USERNAME
    file_env MONGO_INITDB_ROOT_PASSWORD
    local user=${MONGO_INITDB_ROOT_USERNAME:-} password=${MONGO_INITDB_ROOT_PASSWORD:-}
    if [ -n "$user" ] && [ -n "$password" ]; then
        root_user=$user
    elif [ -n "$user" ] || [ -n "$password" ]; then
        log "missing MONGO_INITDB_ROOT_USERNAME or MONGO_INITDB_ROOT_PASSWORD: both must be set" \
            "for the root user to be created"
        exit 1
    fi
}

# create_root_user: the root user, against the temporary server (password on stdin, never argv).
create_root_user() {
    log "creating the root user '$root_user' in admin"
    if ! printf '%s' "$MONGO_INITDB_ROOT_PASSWORD" |
        cairn-create-user "127.0.0.1:$initdb_port" admin "$root_user" root; then
        log "could not create the root user"
        exit 1
    fi
}

# A data directory is fresh when it holds nothing (a new volume's lost+found aside).
is_fresh() {
    local entry
    [ -d "$1" ] || return 0
    for entry in "$1"/* "$1"/.[!.]* "$1"/..?*; do
        [ -e "$entry" ] || continue
        [ "$(basename "$entry")" = lost+found ] || return 1
    done
    return 0
}

initdb_pid=""
stop_initdb_server() {
    [ -n "$initdb_pid" ] || return 0
    kill -TERM "$initdb_pid" 2>/dev/null || true
    local status=0
    wait "$initdb_pid" || status=$?
    initdb_pid=""
    return "$status"
}

# run_initdb PROGRAM ARGS: the scripts in $initdb_dir, in name order, against a temporary server
# on 127.0.0.1:$initdb_port (loopback only: nothing outside the container sees a half-initialised
# database). *.sh scripts run (executable) or are sourced (not executable); *.js scripts run in
# mongosh, which this image does not carry (docs/DOCKER.md).
run_initdb() {
    local program=$1 dbpath f
    shift
    dbpath=$(opt_value dbpath "$@")
    local scripts=()
    if [ -e "$initdb_dir" ]; then
        if ! [ -r "$initdb_dir" ] || ! [ -x "$initdb_dir" ]; then
            # Silence here would skip the scripts for good: the next start is no longer fresh.
            log "$initdb_dir is not readable by $(id -un) (uid $(id -u)): make it readable"
            exit 1
        fi
        for f in "$initdb_dir"/*; do
            [ -f "$f" ] && scripts+=("$f")
        done
    fi
    [ ${#scripts[@]} -gt 0 ] || [ -n "$root_user" ] || return 0
    for f in "${scripts[@]}"; do
        if [[ $f == *.js ]] && ! command -v mongosh >/dev/null; then
            log "$f needs mongosh, which this image does not have: use a *.sh script, or an image" \
                "built FROM this one with mongosh added (docs/DOCKER.md)"
            exit 1
        fi
    done

    local server=(--dbpath "$dbpath" --bind_ip 127.0.0.1 --port "$initdb_port")
    if has_opt log-format -- "$@"; then server+=(--log-format "$(opt_value log-format "$@")"); fi
    if has_opt quiet -- "$@"; then server+=(--quiet); fi
    if [ -n "$root_user" ]; then server+=(--auth); fi
    log "fresh $dbpath: initialising (${#scripts[@]} script(s) from $initdb_dir) against a" \
        "temporary server on 127.0.0.1:$initdb_port"
    "$program" "${server[@]}" 2>&1 &
    initdb_pid=$!
    trap 'stop_initdb_server || true' EXIT
    trap 'exit 143' TERM INT
    local waited_s=0
    until cairn-healthcheck "127.0.0.1:$initdb_port" 2>/dev/null; do
        if ! kill -0 "$initdb_pid" 2>/dev/null || [ "$waited_s" -ge "$initdb_start_wait_s" ]; then
            log "the temporary server did not answer within ${waited_s} s"
            exit 1
        fi
        sleep 1
        waited_s=$((waited_s + 1))
    done

    local mongosh_auth=()
    if [ -n "$root_user" ]; then
        create_root_user
        # One token each, name=value: a value starting with '-' would be read as an option.
        mongosh_auth=("--username=$root_user" "--password=$MONGO_INITDB_ROOT_PASSWORD"
            --authenticationDatabase=admin)
    fi
    for f in "${scripts[@]}"; do
        case $f in
            *.sh)
                if [ -x "$f" ]; then
                    log "running $f"
                    "$f"
                else
                    log "sourcing $f"
                    # shellcheck disable=SC1090  # the user's script
                    . "$f"
                fi
                ;;
            *.js)
                log "running $f in mongosh"
                mongosh --quiet --norc "${mongosh_auth[@]}" \
                    "mongodb://127.0.0.1:$initdb_port/${MONGO_INITDB_DATABASE:-test}" "$f"
                ;;
            *) log "ignoring $f (neither *.sh nor *.js)" ;;
        esac
    done
    if ! stop_initdb_server; then
        log "the temporary server did not stop cleanly"
        exit 1
    fi
    trap - EXIT TERM INT
    log "initdb done; starting cairn"
}

# --- main ------------------------------------------------------------------------------------------
if [[ ${1:-} == -* ]]; then
    set -- cairn "$@"
fi
if [ "${1:-}" != cairn ] && [ "${1:-}" != /usr/local/bin/cairn ]; then
    exec "$@"
fi
program=$1
shift
if has_opt help version -- "$@" || [[ " $* " == *" -h "* || " $* " == *" -V "* ]]; then
    exec "$program" "$@"
fi

read_auth_variables
if [ -n "$root_user" ]; then
    if has_opt noauth -- "$@"; then
        log "MONGO_INITDB_ROOT_* asks for a root user and --auth, but the arguments say --noauth"
        exit 1
    fi
    if ! has_opt auth -- "$@"; then set -- "$@" --auth; fi
fi
# A config file's own addresses and data directory count as given (-f FILE / --config FILE).
config=$(config_path "$@")
if ! has_opt bind_ip bind-ip bind_ip_all bind-ip-all -- "$@" &&
    ! config_value "$config" bindIp >/dev/null && ! config_value "$config" bindIpAll >/dev/null; then
    set -- "$@" --bind_ip_all
fi
if ! has_opt dbpath -- "$@"; then
    if config_dbpath=$(config_value "$config" dbPath); then
        set -- "$@" --dbpath "$config_dbpath"
    else
        set -- "$@" --dbpath /data/db
    fi
fi
dbpath=$(opt_value dbpath "$@")

if [ "$(id -u)" = 0 ]; then
    # A bind mount or a volume made elsewhere may belong to root: cairn must own its files.
    mkdir -p "$dbpath"
    find "$dbpath" \! -user "$user" -exec chown "$user:$user" '{}' + \
        || log "could not give all of $dbpath to $user; cairn may fail to open it"
    exec setpriv --reuid="$user" --regid="$user" --init-groups "${BASH_SOURCE[0]}" "$program" "$@"
fi

if is_fresh "$dbpath"; then
    run_initdb "$program" "$@"
fi
# The server does not need the password; it stays out of its environment.
unset MONGO_INITDB_ROOT_PASSWORD
exec "$program" "$@" 2>&1
