// Benchmark: a new clone-mode workspace until its server answers, against what it stands for.
//
// po-sandbox: `containers.start({ id, path, mode: 'clone' })` for a repository of FILES files of
// about SIZE bytes each (one commit, a few uncommitted and untracked files): the copy prepared on
// the host (a bundle of HEAD, branches and tags fetched into a fresh .git, the working tree as
// git sees it, one tar) and uploaded through the engine, then the same create as bind mode.
// Baselines, in the same rounds: `git clone --no-hardlinks` of the repository into a temporary
// folder, and a bind-mode create of the same folder. The bound: clone create at most
// 1.5x (git clone + bind create).
//
// Each round uses new workspace ids, so each clone create makes and fills a new copy volume;
// containers are stopped after their round and everything of the owner removed at the end.
//
// Usage: node bench/clone.mjs [rounds=3] [files=10000] [size=10000]
// Needs a running Docker engine and the local test base image (scripts/build-test-base-image.sh).
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'

import { baseOptions, fakeHost, newOwner, removeOwner, writeBundle } from '../__test__/provider-fixtures.mjs'

const { registerSandboxLayer } = createRequire(import.meta.url)('../index.js')
const [ROUNDS, FILES, SIZE] = [3, 10000, 10000].map((d, i) => Number(process.argv[2 + i] ?? d))

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b)
  return { p50: s[Math.floor(s.length / 2)], min: s[0], max: s[s.length - 1] }
}

const git = (cwd, ...args) => execFileSync('git', args, { cwd, stdio: ['ignore', 'ignore', 'inherit'] })

/** A repository of FILES text files in 100 folders, one commit, some uncommitted work. */
function repository(dir) {
  mkdirSync(dir)
  git(dir, 'init', '-q', '-b', 'main')
  for (let f = 0; f < FILES; f++) {
    const sub = path.join(dir, `d${f % 100}`)
    if (f < 100) mkdirSync(sub)
    const line = `file ${f}: ${'the quick brown fox jumps over the lazy dog '.repeat(2)}\n`
    writeFileSync(path.join(sub, `f${f}.txt`), line.repeat(Math.ceil(SIZE / line.length)).slice(0, SIZE))
  }
  git(dir, 'add', '-A')
  git(dir, '-c', 'user.name=B', '-c', 'user.email=b@example.invalid', 'commit', '-q', '-m', 'all')
  for (let f = 0; f < 20; f++) writeFileSync(path.join(dir, 'd0', `f${f * 100}.txt`), `changed ${f}\n`)
  writeFileSync(path.join(dir, 'untracked.txt'), 'new\n')
}

execFileSync('bash', [path.join(import.meta.dirname, '../scripts/build-test-base-image.sh')], { stdio: 'ignore' })
const dir = mkdtempSync(path.join(os.tmpdir(), 'po-bench-clone-'))
const poHome = path.join(dir, 'po-home')
mkdirSync(poHome)
const owner = newOwner()
writeBundle(poHome)
const options = { ...baseOptions(poHome, owner), env: { ...process.env } }
delete options.env.PO_SANDBOX_LOG
delete options.env.PO_SANDBOX_WORKSPACE_MODE

try {
  const repo = path.join(dir, 'repo')
  let t = performance.now()
  repository(repo)
  const size = execFileSync('du', ['-sm', repo]).toString().split('\t')[0]
  console.log(`repository: ${FILES} files of ${SIZE} bytes, ${size} MiB with .git, made in ${((performance.now() - t) / 1000).toFixed(1)} s`)
  const layer = registerSandboxLayer(fakeHost(), options)
  const status = await layer.provider.ready()
  if (status.state !== 'ready') throw new Error(`provider not ready: ${JSON.stringify(status)}`)
  // Warm-up: one bind create (the image, the network and the broker are ready afterwards).
  await layer.containers.start({ id: 'warm', path: repo })
  await layer.containers.stop('warm')
  const times = { gitClone: [], bind: [], clone: [] }
  for (let r = 0; r < ROUNDS; r++) {
    const target = mkdtempSync(path.join(os.tmpdir(), 'po-bench-clone-target-'))
    t = performance.now()
    execFileSync('git', ['clone', '-q', '--no-hardlinks', repo, path.join(target, 'c')])
    times.gitClone.push(performance.now() - t)
    rmSync(target, { recursive: true, force: true })
    t = performance.now()
    await layer.containers.start({ id: `bind${r}`, path: repo })
    times.bind.push(performance.now() - t)
    await layer.containers.stop(`bind${r}`)
    t = performance.now()
    await layer.containers.start({ id: `clone${r}`, path: repo, mode: 'clone' })
    times.clone.push(performance.now() - t)
    await layer.containers.stop(`clone${r}`)
  }
  const [g, b, c] = [summary(times.gitClone), summary(times.bind), summary(times.clone)]
  const f = (s) => `p50 ${s.p50.toFixed(0)} ms (min ${s.min.toFixed(0)}, max ${s.max.toFixed(0)})`
  console.log(`git clone --no-hardlinks   ${f(g)}`)
  console.log(`bind-mode create           ${f(b)}`)
  console.log(`clone-mode create          ${f(c)}`)
  console.log(`clone / (git clone + bind) p50: ${(c.p50 / (g.p50 + b.p50)).toFixed(2)}x (bound: 1.5x)`)
} finally {
  await removeOwner(owner)
  rmSync(dir, { recursive: true, force: true })
}
