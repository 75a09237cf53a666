// netpol-verdict: Kubernetes NetworkPolicy verdicts from a policy engine that is not orchgen's, for the
// tenant-wall tests (tests/tenant_walls.py). The engine is Cyclonus's matcher (github.com/mattfenwick/
// cyclonus pkg/matcher: the model SIG Network's conformance probing compares real CNIs against; it
// continues as policy-assistant in sigs.k8s.io/network-policy-api), which builds ingress and egress
// targets from the policies and answers whether a connection between two pods is allowed.
//
// stdin: {"policies": [NetworkPolicy, ...], "namespaces": {name: labels},
//         "probes": [{"src": {"namespace": ns, "labels": {...}}, "dst": {...}, "port": 8265}, ...]}
// stdout: [true, false, ...], one verdict per probe (TCP), in order.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

type pod struct {
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
}

type probe struct {
	Src  pod `json:"src"`
	Dst  pod `json:"dst"`
	Port int `json:"port"`
}

type input struct {
	Policies   []*networkingv1.NetworkPolicy `json:"policies"`
	Namespaces map[string]map[string]string  `json:"namespaces"`
	Probes     []probe                       `json:"probes"`
}

func main() {
	var in input
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "netpol-verdict: bad input:", err)
		os.Exit(2)
	}
	policy := matcher.BuildNetworkPolicies(true, in.Policies)
	peer := func(p pod) *matcher.TrafficPeer {
		ns, ok := in.Namespaces[p.Namespace]
		if !ok {
			fmt.Fprintln(os.Stderr, "netpol-verdict: no labels for namespace", p.Namespace)
			os.Exit(2)
		}
		return &matcher.TrafficPeer{Internal: &matcher.InternalPeer{
			PodLabels: p.Labels, NamespaceLabels: ns, Namespace: p.Namespace}}
	}
	out := make([]bool, 0, len(in.Probes))
	for _, pr := range in.Probes {
		t := &matcher.Traffic{Source: peer(pr.Src), Destination: peer(pr.Dst), ResolvedPort: pr.Port,
			Protocol: v1.ProtocolTCP}
		out = append(out, policy.IsTrafficAllowed(t).IsAllowed())
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "netpol-verdict:", err)
		os.Exit(1)
	}
}
