// Command informer is the reference bench/probes-scale.bench.js measures kube-runbook's probes against: what an
// SRE would otherwise run, client-go shared informers on Nodes, node Leases and Pods, with their default settings
// (full objects in the cache, no transform).
//
// It reads commands on stdin, one per line, and answers each with one JSON line on stdout:
//
//	stats    memory, CPU, time to sync, and the delays of lease renewals seen since the last stats
//	quit     exits
//
// and prints {"ev":"pod-deleted","name":"ns/name","at":ms} as each Pod deletion reaches its handler, so the
// benchmark can time it from the moment it sent the DELETE. Times are Unix milliseconds.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *out) print(v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.enc.Encode(v)
}

func nowMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }

func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:")), "%f", &kb)
			return kb / 1024
		}
	}
	return -1
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func quantile(xs []float64, q float64) any {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s))*q+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	context := flag.String("context", "", "kubeconfig context")
	flag.Parse()
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: *kubeconfig}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *context}).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.QPS, cfg.Burst = 50, 100
	client := kubernetes.NewForConfigOrDie(cfg)
	o := &out{enc: json.NewEncoder(os.Stdout)}

	var mu sync.Mutex
	var leaseDelays []float64
	started := nowMs()
	synced := map[string]float64{}

	factory := informers.NewSharedInformerFactory(client, 0)
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("kube-node-lease"))
	nodes := factory.Core().V1().Nodes().Informer()
	pods := factory.Core().V1().Pods().Informer()
	leases := leaseFactory.Coordination().V1().Leases().Informer()

	_, _ = nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, n any) { _ = n.(*corev1.Node) }})
	_, _ = leases.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, n any) {
		l := n.(*coordinationv1.Lease)
		if l.Spec.RenewTime == nil || !nodes.HasSynced() {
			return
		}
		d := nowMs() - float64(l.Spec.RenewTime.UnixNano())/1e6
		mu.Lock()
		leaseDelays = append(leaseDelays, d)
		mu.Unlock()
	}})
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			o.print(map[string]any{"ev": "pod-deleted", "name": p.Namespace + "/" + p.Name, "at": nowMs()})
		}
	}})

	stop := make(chan struct{})
	factory.Start(stop)
	leaseFactory.Start(stop)
	go func() {
		for name, inf := range map[string]cache.SharedIndexInformer{"nodes": nodes, "leases": leases, "pods": pods} {
			go func(name string, inf cache.SharedIndexInformer) {
				cache.WaitForCacheSync(stop, inf.HasSynced)
				mu.Lock()
				synced[name] = nowMs() - started
				mu.Unlock()
			}(name, inf)
		}
	}()

	cpu0 := cpuSeconds()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch strings.TrimSpace(in.Text()) {
		case "stats":
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mu.Lock()
			d := leaseDelays
			leaseDelays = nil
			s := map[string]float64{}
			for k, v := range synced {
				s[k] = v
			}
			mu.Unlock()
			o.print(map[string]any{
				"ev": "stats", "at": nowMs(), "rssMiB": rssMiB(), "heapMiB": float64(ms.HeapAlloc) / 1048576,
				"cpuSeconds": cpuSeconds() - cpu0, "syncedAfterMs": s,
				"objects":      map[string]int{"nodes": len(nodes.GetStore().ListKeys()), "leases": len(leases.GetStore().ListKeys()), "pods": len(pods.GetStore().ListKeys())},
				"leaseDelayMs": map[string]any{"n": len(d), "p50": quantile(d, 0.5), "p99": quantile(d, 0.99)},
			})
		case "quit":
			close(stop)
			return
		}
	}
	close(stop)
}
