//go:build tools

// Package tools pins the control-plane commands that build.sh compiles. The build tag keeps this
// file out of every build; it only exists so that `go mod tidy` records the full dependency graph
// (and its checksums in go.sum) of the programs below.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
