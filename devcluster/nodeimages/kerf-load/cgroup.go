package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// v1Unlimited is what cgroup v1 reports as an unlimited memory.limit_in_bytes on 64-bit
// kernels with 4 KiB pages; cgroup v2's "max" is mapped onto it.
const v1Unlimited = "9223372036854771712"

type keyValue struct{ key, value string }

// cgroupValues reads the limits and counters of the process's own cgroup under sysfs
// (normally /sys/fs/cgroup), named by their cgroup v1 names; selfCgroup is the content
// of /proc/self/cgroup. Missing files are left out.
func cgroupValues(sysfs string, selfCgroup string) []keyValue {
	var out []keyValue
	add := func(key, value string) { out = append(out, keyValue{key, value}) }
	read := func(path string) (string, bool) {
		data, err := os.ReadFile(path)
		return strings.TrimSpace(string(data)), err == nil
	}
	stat := func(path string) map[string]string {
		text, _ := read(path)
		values := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			if key, value, ok := strings.Cut(line, " "); ok {
				values[key] = value
			}
		}
		return values
	}

	if _, err := os.Stat(filepath.Join(sysfs, "cgroup.controllers")); err == nil {
		dir := ownDir(sysfs, cgroupPaths(selfCgroup)[""])
		if text, ok := read(filepath.Join(dir, "cpu.max")); ok {
			if quota, period, found := strings.Cut(text, " "); found {
				if quota == "max" {
					quota = "-1"
				}
				add("cpu.cfs_quota_us", quota)
				add("cpu.cfs_period_us", period)
			}
		}
		if text, ok := read(filepath.Join(dir, "cpu.weight")); ok {
			if weight, err := strconv.ParseInt(text, 10, 64); err == nil {
				// The inverse of the shares-to-weight mapping of runc and the kubelet.
				add("cpu.shares", strconv.FormatInt(2+(weight-1)*262142/9999, 10))
			}
		}
		if text, ok := read(filepath.Join(dir, "memory.max")); ok {
			if text == "max" {
				text = v1Unlimited
			}
			add("memory.limit_in_bytes", text)
		}
		if text, ok := read(filepath.Join(dir, "memory.current")); ok {
			add("memory.usage_in_bytes", text)
		}
		cpuStat := stat(filepath.Join(dir, "cpu.stat"))
		if v, ok := cpuStat["nr_throttled"]; ok {
			add("cpu.nr_throttled", v)
		}
		if v, err := strconv.ParseInt(cpuStat["throttled_usec"], 10, 64); err == nil {
			add("cpu.throttled_time", strconv.FormatInt(v*1000, 10))
		}
		return out
	}

	paths := cgroupPaths(selfCgroup)
	cpu := ownDir(filepath.Join(sysfs, "cpu"), paths["cpu"])
	memory := ownDir(filepath.Join(sysfs, "memory"), paths["memory"])
	for _, name := range []string{"cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares"} {
		if text, ok := read(filepath.Join(cpu, name)); ok {
			add(name, text)
		}
	}
	for _, name := range []string{"memory.limit_in_bytes", "memory.usage_in_bytes"} {
		if text, ok := read(filepath.Join(memory, name)); ok {
			add(name, text)
		}
	}
	cpuStat := stat(filepath.Join(cpu, "cpu.stat"))
	for _, name := range []string{"nr_throttled", "throttled_time"} {
		if v, ok := cpuStat[name]; ok {
			add("cpu."+name, v)
		}
	}
	return out
}

// cgroupPaths maps each controller (v2: "") to the process's cgroup path in
// /proc/self/cgroup.
func cgroupPaths(selfCgroup string) map[string]string {
	paths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(selfCgroup), "\n") {
		fields := strings.SplitN(line, ":", 3)
		if len(fields) != 3 {
			continue
		}
		for _, controller := range strings.Split(fields[1], ",") {
			paths[controller] = fields[2]
		}
	}
	return paths
}

// ownDir is the process's cgroup directory under a mount: mount/path where that exists
// (on a host), else the mount itself (in a container, where the runtime mounts the
// container's own cgroup there while /proc/self/cgroup may still show the host's path).
func ownDir(mount, path string) string {
	if path != "" && path != "/" {
		dir := filepath.Join(mount, path)
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			return dir
		}
	}
	return mount
}
