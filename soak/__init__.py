"""The chaos soak (`make soak`): kubesim, one webhook and two reconciler replicas under
leader kills and stops, API faults before and after the commit, pod deletions and scaling,
for a bounded time; then checks over what the cluster recorded, printed as figures."""
