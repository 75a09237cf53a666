"""GitOps renderers: everything under a bundle's gitops/ (and kubernetes/kustomization.yaml).

`wrap.render` is a bundle renderer: it runs after the plan renderers and wraps what they wrote.
One module per mode (`kustomize`, `argocd`, `flux`); `common` holds what they share. A new GitOps
tool is one module here plus its entry in `wrap`.

May import: the Plan, errors and yamlio. Never the other renderers: it reads their files only.
"""
