package main

import (
	"os"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
)

// burnPeriod bounds how far behind the burner may fall before it starts afresh: a
// throttled or starved process does not burst to catch up once it may run again.
const burnPeriod = time.Second

// spinSlice is how long a worker spins before it looks at the process's CPU time again.
const spinSlice = time.Millisecond

// burner spins goroutines that together use the asked millicores. They steer by the
// process's own CPU time, not by the wall clock: on a busy machine a worker preempted
// mid-spin has burnt nothing, so a duty cycle would use less than asked.
type burner struct {
	stop chan struct{}
	done sync.WaitGroup
}

func startBurner(millis int64) *burner {
	b := &burner{stop: make(chan struct{})}
	if millis <= 0 {
		return b
	}
	// At most one core each: a goroutine can use no more.
	workers := (millis + 999) / 1000
	for i := int64(0); i < workers; i++ {
		b.done.Add(1)
		go b.work(float64(millis) / 1000)
	}
	return b
}

// processCPU is the CPU time the whole process has used.
func processCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// work spins while the process is behind `cores` × the time since it started, and
// sleeps while it is ahead; every worker steers the same total.
func (b *burner) work(cores float64) {
	defer b.done.Done()
	base, since := processCPU(), time.Now()
	for {
		select {
		case <-b.stop:
			return
		default:
		}
		used := processCPU() - base
		owed := time.Duration(cores*float64(time.Since(since))) - used
		if owed > time.Duration(cores*float64(burnPeriod)) {
			base, since = processCPU(), time.Now()
			continue
		}
		if owed > 0 {
			for start := time.Now(); time.Since(start) < spinSlice; {
			}
			continue
		}
		time.Sleep(time.Duration(float64(-owed) / cores))
	}
}

func (b *burner) Stop() {
	close(b.stop)
	b.done.Wait()
}

const chunkSize = 1 << 20

// holder keeps the asked bytes resident: allocated in chunks, every page written.
type holder struct {
	chunks [][]byte
	size   int64
}

func (h *holder) Set(bytes int64) {
	shrunk := false
	for h.size > bytes {
		last := len(h.chunks) - 1
		h.size -= int64(len(h.chunks[last]))
		h.chunks[last] = nil // else the backing array keeps it alive
		h.chunks = h.chunks[:last]
		shrunk = true
	}
	for h.size < bytes {
		n := bytes - h.size
		if n > chunkSize {
			n = chunkSize
		}
		chunk := make([]byte, n)
		// Untouched pages are not resident; one write to each makes them so (and past
		// the container's limit, gets the process OOM-killed, as a real workload would).
		for i := 0; i < len(chunk); i += pageSize {
			chunk[i] = 1
		}
		h.chunks = append(h.chunks, chunk)
		h.size += n
	}
	if shrunk {
		debug.FreeOSMemory()
	}
}

var pageSize = os.Getpagesize()
