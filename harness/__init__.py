"""Tooling that runs kerf as in production on a local cluster: a backend process (kubesim
or devcluster's real control plane), kubectl over it, kerf's manifests applied and its two
services started with their own ServiceAccounts. Used by `make demo-real` and the
end-to-end tests; the product's packages (`app`, `webhook`, `reconciler`) never import it.
"""
