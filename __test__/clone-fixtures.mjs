// Shared by the clone-mode tests on each engine (clone, podman, nonroot): a tree hash of a host
// folder, host git, a small repository with a commit, a modified and an untracked file, the
// planting routes of the guard tests, and the acceptance of diff and apply in one sandbox.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { spawn } from 'node:child_process'
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { root, run } from './helpers.mjs'

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
 * files as uid:gid, and the container user's). */
export const LOOK_COPY = `set -e
printf 'log=%s\\n' "$(git log --all --format=%H | tr '\\n' ' ')"
printf 'status=%s\\n' "$(git status --porcelain | tr '\\n' '|')"
printf 'tracked=%s\\n' "$(cat tracked.txt)"
printf 'owners=%s\\n' "$(stat -c %u:%g . tracked.txt untracked.txt .git .git/HEAD .git/index .git/objects | sort -u | tr '\\n' ' ')"
printf 'user=%s\\n' "$(id -u):$(id -g)"
`

/** Every planting route of the guard tests, then a commit and a push that must fail; prints the
 * commit's id last. (The copy has no `.git/hooks` folder: the agent makes one.) */
export const PLANT = `
mkdir -p .git/hooks
printf '#!/bin/sh\\necho planted\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
printf '#!/bin/sh\\necho planted\\n' > .git/hooks/post-checkout
git config core.fsmonitor 'echo planted'
printf '[alias]\\n  x = !echo planted\\n' >> .git/config
mkdir -p .pi/extensions && echo 'export default () => {}' > .pi/extensions/planted.ts
echo 'echo planted' > .envrc
echo '{"scripts":{"postinstall":"echo planted"}}' > package.json
printf 'all:\\n\\techo planted\\n' > Makefile
git add -A && git -c core.hooksPath=/dev/null commit -q -m 'agent work'
git push -q origin main 2>/dev/null && echo pushed || echo push-refused
git rev-parse HEAD
`

/** What must not change on the host when the work is taken: HEAD, the index, the status, the hooks. */
export async function hostState(folder) {
  const index = createHash('sha256').update(readFileSync(path.join(folder, '.git/index'))).digest('hex')
  return { head: await git(folder, 'symbolic-ref', 'HEAD'), at: await git(folder, 'rev-parse', 'HEAD'), index, status: await git(folder, 'status', '--porcelain'), hooks: treeHash(path.join(folder, '.git/hooks')) }
}

/** A clone-mode sandbox driven through the CLI: `po(command, ...args)` runs `po-sandbox`. */
export function cliSandbox(po, folder) {
  const json = async (command, ...a) => {
    const r = await po(command, folder, '--json', ...a)
    const out = r.stdout.trim() ? JSON.parse(r.stdout) : null
    if (r.code === 0) return out
    throw Object.assign(new Error(out?.error?.message ?? r.stderr), { code: out?.error?.code ?? null })
  }
  return {
    exec: (script) => po('exec', folder, '--', 'sh', '-c', script),
    diff: () => json('diff'),
    apply: ({ branch }) => json('apply', '--branch', branch),
  }
}

/**
 * The clone-mode acceptance in one running sandbox of a `smallRepository` copy (issue 25), on
 * any engine: `sandbox` has `exec(script)` (inside the copy: `{ code, stdout, stderr }`),
 * `diff()` and `apply({ branch })` (resolving as the API does, rejecting with a coded error).
 * Every planting route changes nothing on the host (`before`: the tree hash before `up`); a
 * second commit and uncommitted work follow; `diff` names both commits; `apply` puts them on
 * `branch` with the same ids, HEAD, index, status and hooks untouched; a second apply changes
 * nothing; a host commit on that branch meanwhile is a divergence, refused with no change.
 */
export async function plantAndApply(sandbox, folder, before, branch) {
  const base = await git(folder, 'rev-parse', 'HEAD')
  const more = 'echo second > second.txt && git add second.txt && git -c core.hooksPath=/dev/null commit -q -m second && echo edited >> tracked.txt && echo note > notes.txt && git rev-parse HEAD'
  // Each route planted (a failed write inside an && list would not stop set -e).
  const planted = 'test -x .git/hooks/pre-commit; test -s .git/hooks/post-checkout; test -s .pi/extensions/planted.ts; git config --get alias.x >/dev/null'
  const work = await sandbox.exec(`set -e\n${PLANT}\n${planted}\n${more}`)
  assert.equal(work.code, 0, work.stderr)
  const [refused, agent, second] = work.stdout.trim().split('\n').slice(-3)
  assert.equal(refused, 'push-refused')
  assert.equal(treeHash(folder), before, 'the host folder, .git included, is byte for byte the same')

  const diff = await sandbox.diff()
  assert.equal(diff.base, base)
  assert.deepEqual(diff.commits.map((c) => [c.id, c.subject]), [[second, 'second'], [agent, 'agent work']])
  const committed = ['.envrc', '.pi/extensions/planted.ts', 'Makefile', 'package.json', 'second.txt', 'tracked.txt', 'untracked.txt']
  assert.deepEqual(diff.committed.files.map((f) => f.path).sort(), committed)
  assert.deepEqual(diff.uncommitted.files.map((f) => [f.path, f.change]), [['notes.txt', 'added'], ['tracked.txt', 'modified']])

  const host = await hostState(folder)
  const applied = await sandbox.apply({ branch })
  assert.deepEqual([applied.branch, applied.changed, applied.previous ?? null], [branch, true, null])
  const log = (await git(folder, 'log', '--format=%H', `${base}..${branch}`)).split('\n')
  assert.deepEqual(log, [applied.uncommittedCommit, second, agent], 'the same ids, the uncommitted work on top')
  assert.equal(await git(folder, 'show', `${branch}:notes.txt`), 'note')
  assert.deepEqual(await hostState(folder), host, 'HEAD, index, working tree and hooks untouched')
  const again = await sandbox.apply({ branch })
  assert.deepEqual([again.changed, again.tip], [false, applied.tip], 'a second apply is a no-op')
  assert.match(again.message, /already: the same work, nothing changed/)
  assert.equal(await git(folder, 'rev-parse', branch), applied.tip)

  const mine = await git(folder, 'commit-tree', `${branch}^{tree}`, '-p', branch, '-m', 'mine')
  await git(folder, 'update-ref', `refs/heads/${branch}`, mine)
  await assert.rejects(sandbox.apply({ branch }), (e) => e.code === 'APPLY_REFUSED' && /diverged/.test(e.message))
  assert.equal(await git(folder, 'rev-parse', branch), mine)
  assert.deepEqual(await hostState(folder), host, 'still no change but the person\'s own commit')
  return { agent, second, tip: applied.tip }
}

export function parseLines(text) {
  return Object.fromEntries(text.trim().split('\n').filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1).trimEnd()]))
}

/**
 * A case-insensitive folder: `casefold-fs.py` (FUSE, mfusepy on libfuse 3, in the venv
 * `scripts/casefold-venv.sh` makes under `.tmp/`) over a fresh backing folder, unmounted and removed when the test ends. The kernel here
 * has no casefold (CONFIG_UNICODE) for an ext4 casefold folder on a loop device; this folder
 * looks names up as such a file system does. Fails saying what to install where FUSE, venv or
 * PyPI is missing.
 */
export async function casefoldFolder(t) {
  const venv = path.join(root, '.tmp', 'casefold-venv')
  const py = path.join(venv, 'bin', 'python')
  const how = 'install them (Debian, as root: apt-get install python3-venv fuse3) and make sure PyPI answers'
  if (!existsSync('/dev/fuse')) throw new Error(`the case-insensitive folder needs FUSE (/dev/fuse is missing): ${how}`)
  const tryRun = (cmd, args) => run(cmd, args).catch((e) => ({ code: -1, stderr: e.message }))
  if ((await tryRun(py, ['-c', 'import mfusepy'])).code !== 0) {
    throw new Error(`the case-insensitive folder needs mfusepy in ${venv}: run 'bash scripts/casefold-venv.sh' (npm test runs it with the engine set-up); ${how}`)
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'po-casefold-'))
  const backing = path.join(dir, 'backing')
  const folder = path.join(dir, 'folder')
  mkdirSync(backing)
  mkdirSync(folder)
  const child = spawn(py, [path.join(root, '__test__', 'casefold-fs.py'), backing, folder], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  t.after(async () => {
    await tryRun('fusermount3', ['-u', folder])
    child.kill()
    rmSync(dir, { recursive: true, force: true })
  })
  const mounted = () => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => l.split(' ')[4] === folder)
  for (let i = 0; i < 100 && !mounted(); i++) {
    if (child.exitCode !== null) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  if (!mounted()) throw new Error(`the case-insensitive folder did not mount at ${folder}: ${stderr.trim() || 'no output'}; ${how}`)
  return folder
}
