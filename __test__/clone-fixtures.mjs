// Shared by the clone-mode tests on each engine (clone, podman, nonroot): a tree hash of a host
// folder, host git, and a small repository with a commit, a modified and an untracked file.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { lstatSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { run } from './helpers.mjs'

export async function git(cwd, ...args) {
  const r = await run('git', args, { cwd })
  assert.equal(r.code, 0, `git ${args.join(' ')}: ${r.stderr}`)
  return r.stdout.trim()
}

/** Every path under `dir` (`.git` included, links not followed) with its type, mode and content hash. */
export function treeHash(dir) {
  const h = createHash('sha256')
  const walk = (rel) => {
    const full = path.join(dir, rel)
    const st = lstatSync(full)
    h.update(`${rel}\0${st.mode}\0`)
    if (st.isSymbolicLink()) h.update(readlinkSync(full))
    else if (st.isDirectory()) for (const e of readdirSync(full).sort()) walk(path.join(rel, e))
    else h.update(readFileSync(full))
  }
  walk('')
  return h.digest('hex')
}

/** One commit, then `tracked.txt` modified and `untracked.txt` new; the commit id. */
export async function smallRepository(folder) {
  await git(folder, 'init', '-q', '-b', 'main')
  await git(folder, 'config', 'user.name', 'Ann Person')
  await git(folder, 'config', 'user.email', 'ann@example.invalid')
  writeFileSync(path.join(folder, 'tracked.txt'), 'committed\n')
  await git(folder, 'add', '.')
  await git(folder, 'commit', '-q', '-m', 'first')
  writeFileSync(path.join(folder, 'tracked.txt'), 'changed on the host\n')
  writeFileSync(path.join(folder, 'untracked.txt'), 'new on the host\n')
  return git(folder, 'rev-parse', 'HEAD')
}

/** Run inside the copy of a small repository: what it shows as `key=value` lines (owners of its
 * files as uid:gid, and the container user's), then a planted hook and an agent commit. */
export const LOOK_AND_PLANT = `set -e
printf 'log=%s\\n' "$(git log --all --format=%H | tr '\\n' ' ')"
printf 'status=%s\\n' "$(git status --porcelain | tr '\\n' '|')"
printf 'tracked=%s\\n' "$(cat tracked.txt)"
printf 'owners=%s\\n' "$(stat -c %u:%g . tracked.txt untracked.txt .git .git/HEAD .git/index .git/objects | sort -u | tr '\\n' ' ')"
printf 'user=%s\\n' "$(id -u):$(id -g)"
printf '#!/bin/sh\\necho planted\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
git add -A && git -c core.hooksPath=/dev/null commit -q -m 'agent work'
printf 'agent=%s\\n' "$(git rev-parse HEAD)"
`

export function parseLines(text) {
  return Object.fromEntries(text.trim().split('\n').filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1).trimEnd()]))
}
