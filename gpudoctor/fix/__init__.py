"""Fixers: turn the typed fix actions of findings into a plan, a reviewable shell script, real
changes (recorded in a manifest) and their undo.

Submodules, one job each:
  shellquote  quoting for bash/zsh/fish and safe comments
  envfile     gpudoctor's single user-local env file: read, write, apply, render exports
  render      one action -> shell lines (explicit registry keyed by action type)
  plan        merge fixes across findings, dedupe, order, split user / system
  script      the whole plan as one bash script (dry-run)
  manifest    the JSON record of every change, for undo
  apply       perform user-local actions (no root), idempotently
  undo        reverse exactly the manifest
  system      run the root part of a plan (only when asked)
  verify      re-run the affected checks under the new environment
"""
