#!/usr/bin/env bash
# Build the pinned e2e control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok, metrics-server) from Go modules into a cache directory outside the repository:
#
#   ${PLACER_TESTENV_CACHE:-$HOME/.cache/placer/testenv}/<k8s>-<etcd>-<kwok>/bin/
#
# Idempotent: when the cache directory holds a complete build made from the same versions.env,
# k8s/go.mod, k8s/go.sum and build recipe, it says so and exits at once.
#
# Two parts, each with its own fingerprint: the core (etcd, Kubernetes, kwok) and the extras
# (metrics-server, kwok's metrics and usage config, kwok's stages with this repository's changes),
# fingerprinted from the versions.env lines below its "# Extras" line. A complete core with missing
# or outdated extras gets only the extras built, in place: adding them never rebuilds Kubernetes.
#
# Usage: testenv/build.sh              build if needed, print phase timings
#        testenv/build.sh --check      exit 0 if a complete build exists, 1 otherwise (no build)
#        testenv/build.sh --print-dir  print the build directory (no build)
#
# Why a wrapper module: k8s.io/kubernetes's go.mod replaces its staging modules (k8s.io/api, ...)
# with local paths, so `go install k8s.io/kubernetes/cmd/...@v1.X.Y` is refused. k8s/go.mod
# requires k8s.io/kubernetes and replaces every staging module with its published v0.X.Y tag (the
# pattern used by kubernetes-sigs/scheduler-plugins). etcd's server module has the same problem
# (replaces ../api etc.) and is built from the same wrapper at the version Kubernetes requires.
# kwok's and metrics-server's go.mod have no replace directives: `go install pkg@version` builds them.
#
# The script body is in functions called from the last line, so bash has parsed all of it before
# anything runs: editing this file during a (long) build cannot derail the running build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

RECIPE=1 # bump when the build flags below change, so that old builds are not reused
EXTRAS_RECIPE=2 # the same for the extras (metrics-server flags, the kwok config written below)
export GOTOOLCHAIN=local # never download a toolchain: the local Go must accept the go.mod files
export CGO_ENABLED=0
export GOFLAGS=-buildvcs=false

cache_root=${PLACER_TESTENV_CACHE:-$HOME/.cache/placer/testenv}
dest=$cache_root/$K8S_VERSION-$ETCD_VERSION-$KWOK_VERSION
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
# Pods with this label are never completed by kwok's pod-complete stage: a Job pod that must keep
# running (the usage tests give it a load) carries it. tests/e2e/usage_support.py names it too.
KEEP_RUNNING_LABEL=placer.io/test-keep-running
work=
timings=()
phase_start=$SECONDS

core_versions() { sed '/^# Extras/,$d' "$here/versions.env"; }
extras_versions() { sed -n '/^# Extras/,$p' "$here/versions.env"; }

fingerprint() {
    { echo "recipe=$RECIPE"; core_versions; cat "$here/k8s/go.mod" "$here/k8s/go.sum"; } |
        sha256sum | cut -d' ' -f1
}

extras_fingerprint() {
    { echo "extras-recipe=$EXTRAS_RECIPE"; echo "keep-running=$KEEP_RUNNING_LABEL"; extras_versions
        cat "$here/kwok-usage.yaml"; } | sha256sum | cut -d' ' -f1
}

core_complete() {
    [[ -f $dest/.complete && "$(cat "$dest/.complete")" == "$(fingerprint)" ]] || return 1
    local b
    for b in "${bins[@]}"; do [[ -x $dest/bin/$b ]] || return 1; done
    [[ -f $dest/kwok-stages.yaml ]]
}

extras_complete() {
    [[ -f $dest/.complete-extras && "$(cat "$dest/.complete-extras")" == "$(extras_fingerprint)" ]] &&
        [[ -x $dest/bin/metrics-server && -f $dest/kwok-metrics.yaml ]]
}

complete() { core_complete && extras_complete; }

exit_if_complete() {
    if complete; then
        echo "testenv: up to date in $dest/bin (nothing to build)"
        exit 0
    fi
}

phase_done() {
    local took=$((SECONDS - phase_start))
    timings+=("$(printf '%-28s %4ds' "$1" "$took")")
    echo "testenv: phase $1 took ${took}s"
    phase_start=$SECONDS
}

build_kubernetes_and_etcd() {
    local major minor ldflags pkg
    major=${K8S_VERSION#v}
    major=${major%%.*}
    minor=${K8S_VERSION#v*.}
    minor=${minor%%.*}
    ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ldflags+=" -X $pkg.gitTreeState=clean"
    done
    ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
    # One `go build` for all four commands: shared packages compile once.
    (cd "$here/k8s" && nice -n 10 go build -mod=readonly -trimpath -ldflags "$ldflags" \
        -o "$work/bin/" \
        go.etcd.io/etcd/server/v3 \
        k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler)
    mv "$work/bin/server" "$work/bin/etcd" # go names the binary of .../server/v3 "server"
}

build_kwok() {
    # From kwok's own go.mod/go.sum (the module itself is checked against the checksum database).
    (cd "$work" && GOBIN="$work/bin" nice -n 10 go install -trimpath -ldflags "-s -w" \
        "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
}

kwok_module_dir() { echo "$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION"; }

write_kwok_stages() {
    # kwok (unlike kwokctl) has no built-in stages: take the upstream "fast" node and pod stages of
    # the same release from the module cache (node-initialize, node-heartbeat, pod-ready,
    # pod-complete, pod-delete: terminating pods are deleted at once since there is no kubelet).
    # pod-complete (Job pods succeed as soon as they run) spares pods labelled
    # $KEEP_RUNNING_LABEL=true: one more requirement in its selector.
    local stage_root f
    stage_root=$(kwok_module_dir)/kustomize/stage
    for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        echo "---"
        echo "# from sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage/$f"
        if [[ $f == pod/fast/pod-complete.yaml ]]; then
            echo "# (selector: + $KEEP_RUNNING_LABEL NotIn [true], added by testenv/build.sh)"
            sed "/^    matchExpressions:\$/a\\
    - key: '.metadata.labels[\"$KEEP_RUNNING_LABEL\"]'\\
      operator: 'NotIn'\\
      values:\\
      - 'true'" "$stage_root/$f"
        else
            cat "$stage_root/$f"
        fi
    done >"$work/kwok-stages.yaml"
    [[ $(grep -c "$KEEP_RUNNING_LABEL" "$work/kwok-stages.yaml") == 2 ]] || {
        echo "testenv: could not add the $KEEP_RUNNING_LABEL requirement to pod-complete" >&2
        exit 1
    }
}

build_metrics_server() {
    (cd "$work" && GOBIN="$work/bin" nice -n 10 go install -trimpath \
        -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION" \
        "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION")
}

write_kwok_metrics() {
    # kwok's simulated kubelet resource metrics (upstream's Metric serving
    # /metrics/nodes/{nodeName}/metrics/resource, which metrics-server scrapes) and the
    # ClusterResourceUsage that reads a running pod's usage from its annotations
    # kwok.x-k8s.io/usage-cpu and kwok.x-k8s.io/usage-memory (testenv/kwok-usage.yaml).
    local f=resource/metrics-resource.yaml
    {
        echo "---"
        echo "# from sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/metrics/$f"
        cat "$(kwok_module_dir)/kustomize/metrics/$f"
        echo "---"
        echo "# from testenv/kwok-usage.yaml"
        cat "$here/kwok-usage.yaml"
    } >"$work/kwok-metrics.yaml"
}

build_extras() {
    # Into $work (a fresh build, or scratch space for extras added to a complete core).
    if [[ -x $dest/bin/metrics-server && "$(cat "$dest/.metrics-server-version" 2>/dev/null)" == \
        "$METRICS_SERVER_VERSION" ]]; then
        cp -p "$dest/bin/metrics-server" "$work/bin/"
    else
        build_metrics_server
    fi
    echo "$METRICS_SERVER_VERSION" >"$work/.metrics-server-version"
    phase_done "build metrics-server"
    write_kwok_stages
    write_kwok_metrics
    phase_done "kwok stages and metrics"
    "$work/bin/metrics-server" --version 2>&1 | sed -n "1s/^/testenv: metrics-server: /p"
    extras_fingerprint >"$work/.complete-extras"
}

add_extras() {
    # The core is complete: build the extras in scratch space, then move them in one by one
    # (each mv is atomic; .complete-extras last, so a half-done run is redone next time).
    local t_all=$SECONDS
    echo "testenv: adding metrics-server $METRICS_SERVER_VERSION and the kwok config to $dest"
    work=$(mktemp -d "$cache_root/.build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/bin"
    phase_start=$SECONDS
    build_extras
    mv "$work/bin/metrics-server" "$dest/bin/metrics-server"
    local f
    for f in kwok-stages.yaml kwok-metrics.yaml .metrics-server-version .complete-extras; do
        mv "$work/$f" "$dest/$f"
    done
    echo "testenv: timings"
    printf '  %s\n' "${timings[@]}"
    printf '  %-28s %4ds\n' "total" "$((SECONDS - t_all))"
}

main() {
    case "${1:-}" in
    --check) complete && exit 0 || exit 1 ;;
    --print-dir) echo "$dest" && exit 0 ;;
    "") ;;
    *) echo "usage: $0 [--check|--print-dir]" >&2 && exit 2 ;;
    esac

    exit_if_complete
    # One build at a time per build directory (e.g. `make testenv` and `make cluster-up` started
    # together): the second one waits here, then finds the first one's result. A build of other
    # versions (another checkout on an older release) has its own lock and does not wait.
    mkdir -p "$cache_root"
    exec 9>"$cache_root/.build-${dest##*/}.lock"
    flock 9
    exit_if_complete

    command -v go >/dev/null || { echo "testenv: go is not installed" >&2 && exit 1; }
    if core_complete; then
        add_extras
        exit 0
    fi
    local v
    for v in "go.etcd.io/etcd/server/v3 $ETCD_VERSION" "k8s.io/kubernetes $K8S_VERSION"; do
        grep -q "^[[:space:]]*$v\$" "$here/k8s/go.mod" || {
            echo "testenv: k8s/go.mod does not require $v (versions.env disagrees)" >&2
            exit 1
        }
    done

    local t_all=$SECONDS
    echo "testenv: building into $dest ($(go version | cut -d' ' -f3), GOCACHE=$(go env GOCACHE))"
    work=$(mktemp -d "$cache_root/.build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/bin"
    phase_start=$SECONDS

    (cd "$here/k8s" && go mod download) # the Kubernetes graph is ~800 MB in the module cache
    phase_done "download modules"
    build_kubernetes_and_etcd
    phase_done "build kubernetes+etcd"
    build_kwok
    phase_done "build kwok"
    build_extras

    local b
    for b in "${bins[@]}"; do
        "$work/bin/$b" --version 2>&1 | sed -n "1s/^/testenv: $b: /p" # sed reads all: no SIGPIPE
    done
    fingerprint >"$work/.complete"
    chmod 755 "$work"
    rm -rf "$dest"
    mv "$work" "$dest"
    trap - EXIT

    echo "testenv: timings"
    printf '  %s\n' "${timings[@]}"
    printf '  %-28s %4ds\n' "total" "$((SECONDS - t_all))"
    echo "testenv: $(du -sh "$dest" | cut -f1) in $dest"
}

main "$@"
