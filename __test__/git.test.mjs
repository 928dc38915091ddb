// Git over HTTPS through the broker, with no credential inside the container: a real git
// smart-HTTP server of this test's own (`git http-backend` behind a small HTTP front on
// 127.0.0.1 that requires a token) under a made-up name the policy maps there; the real git
// inside a real workspace container (network none) clones, fetches and pushes a new branch,
// for an HTTPS and an SSH-form remote; the server sees the real token, the container holds only
// the placeholder; a push to the default branch, a tag, a force update and a repository outside
// the rules are refused with the reason git shows, and the server sees none of them; a rotated
// token is used without a restart; a revoked grant stops it; a restarted hub honours it again.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { root as repoRoot, run, tempDir, waitFor } from './helpers.mjs'
import { hostEnv, openLayer, useTestBaseImage } from './provider-fixtures.mjs'
import { brokeredWorkspace, git, gitServer } from './service-fixtures.mjs'

useTestBaseImage()

/** A command in the workspace container as its user, with its environment; code and output. */
function inside(containerId, script) {
  return run('docker', ['exec', containerId, 'sh', '-c', script])
}

test('git through the broker: clone, fetch and push a new branch with the host credential; pushes outside the rules refused with git showing why; no token inside', { timeout: 300000 }, async (t) => {
  const dir = tempDir(t, 'po-git-')
  const root = path.join(dir, 'srv')
  const seed = path.join(dir, 'seed')
  for (const repo of ['acme/app.git', 'other/lib.git']) {
    git(dir, 'init', '-q', '--bare', path.join(root, repo))
    git(path.join(root, repo), 'config', 'http.receivepack', 'true')
  }
  mkdirSync(seed)
  git(seed, 'init', '-q')
  writeFileSync(path.join(seed, 'README'), 'hello\n')
  git(seed, 'add', 'README')
  git(seed, 'commit', '-q', '-m', 'first')
  for (const repo of ['acme/app.git', 'other/lib.git']) git(seed, 'push', '-q', path.join(root, repo), 'main')
  const TOKEN = 'ghp_real-host-token-0123456789abcdef'
  const server = await gitServer(t, root, TOKEN)
  const origin = `http://127.0.0.1:${server.port}`

  // The person's credential store on the host (their HOME), holding the real token.
  const home = path.join(dir, 'home')
  mkdirSync(home)
  writeFileSync(path.join(home, '.gitconfig'), '[credential]\n\thelper = store\n')
  writeFileSync(path.join(home, '.git-credentials'), `http://po-host:${TOKEN}@127.0.0.1:${server.port}\n`)
  chmodSync(path.join(home, '.git-credentials'), 0o600)

  // The workspace: a clone whose remote names the made-up host.
  const ws = path.join(dir, 'ws')
  git(dir, 'clone', '-q', path.join(root, 'acme/app.git'), ws)
  git(ws, 'remote', 'set-url', 'origin', 'https://git.test/acme/app.git')
  execFileSync('chmod', ['-R', 'a+rwX', ws])

  const env = hostEnv({ HOME: home, GIT_CONFIG_NOSYSTEM: '1', PO_SANDBOX_GIT_HOSTS: `git.test=${origin}`, PO_SANDBOX_NETWORK: 'none' })
  for (const k of ['GH_TOKEN', 'GITHUB_TOKEN', 'GIT_CONFIG_GLOBAL']) delete env[k]
  const { poHome, options, events, c, cenv } = await brokeredWorkspace(t, { id: 'gitws', ws, env, brokered: 'git git.test' })

  // The container holds the placeholder and the git configuration, never the token.
  const placeholder = cenv.find((kv) => kv.startsWith('PO_BROKER_GIT_TOKEN='))?.split('=')[1]
  assert.match(placeholder ?? '', /^po-git-[0-9a-f]{64}$/, cenv.join('\n'))
  assert.ok(!cenv.some((kv) => kv.includes(TOKEN)), cenv.join('\n'))

  const q = (s) => `'${s.replace(/'/g, "'\\''")}'`
  const who = 'git -c user.name=Agent -c user.email=agent@test'
  // fetch, a new branch pushed: through the broker, with the host's token.
  let r = await inside(c, `cd ${q(ws)} && git fetch origin 2>&1 && echo one > f && git add f && ${who} commit -q -m one && git push origin HEAD:refs/heads/agent/one 2>&1`)
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /\* \[new branch\]\s+HEAD -> agent\/one/)
  assert.equal(git(path.join(root, 'acme/app.git'), 'log', '-1', '--format=%s', 'agent/one'), 'one')
  assert.ok(server.requests.some((q) => q.path.startsWith('/acme/app.git/git-receive-pack') && q.auth === 'token'), JSON.stringify(server.requests))
  assert.ok(!server.requests.some((q) => q.auth === 'wrong'), JSON.stringify(server.requests))
  // Moving its own branch forward is allowed.
  r = await inside(c, `cd ${q(ws)} && echo two >> f && ${who} commit -q -am two && git push origin HEAD:refs/heads/agent/one 2>&1`)
  assert.equal(r.code, 0, r.stdout + r.stderr)

  // Refused, each with the reason git shows, and the server never sees them.
  const seen = server.pushes.length
  const refusals = [
    ['HEAD:refs/heads/main', /refs\/heads\/main is the default branch/],
    ['HEAD:refs/tags/v1', /only branches are pushed by default, not refs\/tags\/v1/],
  ]
  for (const [spec, reason] of refusals) {
    r = await inside(c, `cd ${q(ws)} && git push origin ${spec} 2>&1`)
    assert.notEqual(r.code, 0, r.stdout)
    assert.match(r.stdout, /\[remote rejected\]/, r.stdout)
    assert.match(r.stdout, reason, r.stdout)
    assert.match(r.stdout, /remote: Po sandbox refused/, r.stdout)
  }
  // A force update of its own branch (the last commit rewritten).
  r = await inside(c, `cd ${q(ws)} && ${who} commit -q --amend -m rewritten && git push -f origin HEAD:refs/heads/agent/one 2>&1`)
  assert.notEqual(r.code, 0, r.stdout)
  assert.match(r.stdout, /refs\/heads\/agent\/one is not shown to move forward/, r.stdout)
  // A repository that is not a remote of the workspace.
  r = await inside(c, `cd ${q(ws)} && git push https://git.test/other/lib.git HEAD:refs/heads/agent/x 2>&1`)
  assert.notEqual(r.code, 0, r.stdout)
  assert.match(r.stdout, /git\.test\/other\/lib\.git is not a remote of this workspace/, r.stdout)
  assert.equal(server.pushes.length, seen, JSON.stringify(server.pushes))
  assert.equal(git(path.join(root, 'acme/app.git'), 'rev-parse', 'main'), git(seed, 'rev-parse', 'main'))
  assert.throws(() => git(path.join(root, 'acme/app.git'), 'rev-parse', '--verify', '-q', 'refs/tags/v1'))

  // A push rule saved in the policy file is in force for the running container at once: the tag goes.
  const fromEvents = events.length
  writeFileSync(path.join(poHome, 'sandbox-policy.yaml'), 'git:\n  push:\n    - repo: git.test/acme/app.git\n      refs: refs/tags/*\n')
  await waitFor(() => events.slice(fromEvents).some((e) => e.type === 'policy' && e.state === 'applied' && /git rules in force: hosts git\.test=\S+ and 1 push rule\b/.test(e.message)), 'the git rules applied', 15000)
  r = await inside(c, `cd ${q(ws)} && git push origin HEAD:refs/tags/v1 2>&1`)
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.equal(git(path.join(root, 'acme/app.git'), 'rev-parse', 'refs/tags/v1'), git(ws, 'rev-parse', 'HEAD'))
  // policy show: the hosts from the variable, the push rule from the file's line.
  const show = await run(process.execPath, [path.join(repoRoot, 'bin', 'po-sandbox.js'), 'policy', 'show', '--po-home', poHome, '--json'], { env })
  assert.equal(show.code, 0, show.stderr)
  const values = Object.fromEntries(JSON.parse(show.stdout).values.map((v) => [v.name, v]))
  assert.deepEqual(values['git.hosts'], { name: 'git.hosts', value: `git.test=${origin}`, source: 'the variable PO_SANDBOX_GIT_HOSTS' })
  assert.equal(values['git.push'].value, 'git.test/acme/app.git refs/tags/*')
  assert.match(values['git.push'].source, /^sandbox-policy\.yaml line 2$/)

  // An SSH-form remote: cloned and pushed through the same route.
  r = await inside(c, `cd /tmp && git clone -q git@git.test:acme/app.git ssh-form 2>&1 && cd ssh-form && echo s > s && git add s && ${who} commit -q -m ssh && git push origin HEAD:refs/heads/agent/ssh 2>&1`)
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.equal(git(path.join(root, 'acme/app.git'), 'log', '-1', '--format=%s', 'agent/ssh'), 'ssh')

  // Only the placeholder inside: its environment, its processes, its files.
  r = await inside(c, `grep -rl ${q(TOKEN)} /proc/[0-9]*/environ /tmp "$HOME" ${q(ws)} 2>/dev/null; echo done`)
  assert.equal(r.stdout.trim(), 'done', r.stdout)

  // The host's token rotated: the next fetch uses the new one, no restart.
  // (A credential is kept at least a second whatever the host says, so the sources are not run
  // without end.)
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const ROTATED = 'ghp_rotated-token-fedcba9876543210'
  server.token = ROTATED
  writeFileSync(path.join(home, '.git-credentials'), `http://po-host:${ROTATED}@127.0.0.1:${server.port}\n`)
  r = await inside(c, `cd ${q(ws)} && git fetch origin 2>&1`)
  assert.equal(r.code, 0, r.stdout + r.stderr)

  // The audit names the git requests, never a token or the placeholder.
  const audited = JSON.stringify(events)
  assert.ok(!audited.includes(TOKEN) && !audited.includes(ROTATED) && !audited.includes(placeholder))

  // Another hub (a restarted one) adopts the container and honours the same placeholder.
  const again = openLayer(options)
  const adopted = await again.layer.containers.start({ id: 'gitws', path: ws })
  assert.equal(adopted.containerId, c)
  assert.equal(adopted.adopted, true)
  r = await inside(c, `cd ${q(ws)} && git ls-remote origin 2>&1`)
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /refs\/heads\/agent\/ssh/)
  assert.equal(await again.layer.containers.stop('gitws'), true)
})
