"""The one client: which cluster as whom (`kubeconfig`), one request (`kube_http`), `Kube`, one error map (`errors`).

Checked names become path segments here (`names`), and waits that retry and watch live here too (`waits`).
"""
