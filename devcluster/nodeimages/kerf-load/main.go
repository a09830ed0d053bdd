// Command kerf-load uses the CPU and memory it is told to, and can be told again while it
// runs: a workload for kerf's tests and demos on a real node. See docs/devcluster.md.
//
//	kerf-load [run] [--cpu 250m] [--memory 128Mi] [--spec FILE] [--control FILE]
//	kerf-load set [--control FILE] cpu=300m memory=200Mi
//	kerf-load cgroup
//	kerf-load cat FILE
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

const (
	defaultSpec    = "/etc/kerf-load/spec"
	defaultControl = "/tmp/kerf-load.spec"
	pollInterval   = 500 * time.Millisecond
)

func main() {
	args := os.Args[1:]
	command := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		command, args = args[0], args[1:]
	}
	var err error
	switch command {
	case "run":
		err = run(args)
	case "set":
		err = set(args)
	case "cgroup":
		self, _ := os.ReadFile("/proc/self/cgroup")
		for _, kv := range cgroupValues("/sys/fs/cgroup", string(self)) {
			fmt.Printf("%s=%s\n", kv.key, kv.value)
		}
	case "cat":
		err = cat(args)
	default:
		err = usageError(fmt.Sprintf("unknown command %q (run, set, cgroup or cat)", command))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kerf-load: %v\n", err)
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError string

func (e usageError) Error() string { return string(e) }

func parseFlags(flags *flag.FlagSet, args []string) error {
	flags.SetOutput(io.Discard)
	if err := flags.Parse(args); err != nil {
		return usageError(flags.Name() + ": " + err.Error())
	}
	return nil
}

func run(args []string) error {
	flags := flag.NewFlagSet("run", flag.ContinueOnError)
	cpu := flags.String("cpu", "250m", "CPU to use")
	memory := flags.String("memory", "128Mi", "memory to hold")
	spec := flags.String("spec", defaultSpec, "spec file re-read while running")
	control := flags.String("control", defaultControl, "control file `set` writes")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return usageError("run: unexpected argument " + flags.Arg(0))
	}
	amounts, err := parseSpec("cpu="+*cpu+" memory="+*memory, Amounts{})
	if err != nil {
		return usageError("run: " + err.Error())
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		os.Exit(0) // from here: a growing allocation does not delay it
	}()
	// Go limits its threads to the container's CPU limit by default; the load must be able
	// to ask for more, so that the kernel's CFS quota throttles it as it would a real
	// workload.
	runtime.GOMAXPROCS(runtime.NumCPU())

	var mem holder
	mem.Set(amounts.MemoryBytes)
	burn := startBurner(amounts.CPUMillis)
	fmt.Printf("kerf-load: %s\n", amounts)

	lastSeen := ""
	for ; ; time.Sleep(pollInterval) {
		path, text, ok := newestSpec(*spec, *control)
		if !ok || path+"\x00"+text == lastSeen {
			continue
		}
		lastSeen = path + "\x00" + text
		if strings.TrimSpace(text) == "" {
			continue // an absent annotation projects an empty file
		}
		next, err := parseSpec(text, amounts)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kerf-load: %s: %v; keeping %s\n", path, err, amounts)
			continue
		}
		if next == amounts {
			continue
		}
		if next.CPUMillis != amounts.CPUMillis {
			burn.Stop()
			burn = startBurner(next.CPUMillis)
		}
		mem.Set(next.MemoryBytes)
		amounts = next
		fmt.Printf("kerf-load: %s\n", amounts)
	}
}

// newestSpec reads the more recently modified of the spec and control files (the control
// file on a tie: it is the explicit command).
func newestSpec(spec, control string) (path, text string, ok bool) {
	var newest time.Time
	for _, candidate := range []string{control, spec} {
		info, err := os.Stat(candidate)
		if err != nil || (ok && !info.ModTime().After(newest)) {
			continue
		}
		data, err := os.ReadFile(candidate)
		if err != nil {
			continue
		}
		path, text, ok, newest = candidate, string(data), true, info.ModTime()
	}
	return path, text, ok
}

func set(args []string) error {
	flags := flag.NewFlagSet("set", flag.ContinueOnError)
	control := flags.String("control", defaultControl, "control file to write")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	text := strings.Join(flags.Args(), " ")
	if _, err := parseSpec(text, Amounts{}); err != nil {
		return usageError("set: " + err.Error())
	}
	// Written aside then renamed: the running kerf-load never reads half a spec.
	tmp, err := os.CreateTemp(filepath.Dir(*control), ".kerf-load-spec-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), *control)
}

func cat(args []string) error {
	if len(args) != 1 {
		return usageError("cat: one FILE")
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(data)
	return err
}
