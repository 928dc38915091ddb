// The policy file (<poHome>/sandbox-policy.yaml) on a running hub: an allowlist container is
// denied a host with a 403 naming the command that allows it; `po-sandbox allow` adds it and the
// same container reaches it with no restart; `deny` takes it away and closes the connection
// open to it; a broken file changes nothing and `policy check` names its line and field;
// `policy show` names each value's source; `policy init` writes a preset. Upstreams are this
// test's own on 127.0.0.1 under made-up names the file maps there.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import path from 'node:path'

import { addon, root, run, tempDir, waitFor } from './helpers.mjs'
import { baseOptions, cleanupOwner, hostEnv, newOwner, openLayer, tempHome, tempWorkspace, useTestBaseImage, writeBundle } from './provider-fixtures.mjs'

useTestBaseImage()

const cli = path.join(root, 'bin', 'po-sandbox.js')

/** The environment without this machine's network settings, so the file decides. */
function cleanEnv(extra = {}, base = process.env) {
  const env = { ...base }
  for (const k of Object.keys(env)) if (k.startsWith('PO_SANDBOX_NETWORK') || k === 'PO_SANDBOX') delete env[k]
  return { ...env, ...extra }
}

function po(args, env = {}) {
  return run(process.execPath, [cli, ...args], { env: cleanEnv(env) })
}

/**
 * Runs in the container: a loopback bridge to the egress socket (what the extension starts),
 * then one plain-HTTP request through it to `URL`; prints `status <code>` and the body. With
 * HOLD set, prints `open` at the first bytes of the answer and `closed` when it ends.
 */
const PROBE = String.raw`
const net = require('node:net'), http = require('node:http')
const bridge = net.createServer((c) => { const u = net.connect(process.env.PO_BROKER_EGRESS_SOCKET); c.pipe(u); u.pipe(c); c.on('error', () => u.destroy()); u.on('error', () => c.destroy()) })
bridge.listen(0, '127.0.0.1', () => {
  const req = http.request({ host: '127.0.0.1', port: bridge.address().port, path: process.env.URL, headers: { host: new URL(process.env.URL).host } }, (res) => {
    console.log('status ' + res.statusCode)
    res.on('data', (d) => { process.stdout.write(process.env.HOLD ? 'open\n' : String(d)) })
    res.on('end', () => { console.log('closed'); process.exit(0) })
    res.on('error', () => { console.log('closed'); process.exit(0) })
    res.on('aborted', () => { console.log('closed'); process.exit(0) })
  })
  req.on('error', (e) => { console.log('closed ' + e.message); process.exit(0) })
  req.end()
})
`

function probe(containerId, url, hold = false) {
  const args = ['exec', '-e', 'PATH=/usr/local/bin:/usr/bin:/bin', '-e', `URL=${url}`, ...(hold ? ['-e', 'HOLD=1'] : []), containerId, 'node', '-e', PROBE]
  if (!hold) return run('docker', args)
  const child = spawn('docker', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  return { child, out: () => out }
}

test('the policy file: allow applies to a running container with no restart, deny closes what is open, a broken file changes nothing; show, check and init', { timeout: 240000 }, async (t) => {
  const seen = []
  const upstream = http.createServer((req, res) => {
    seen.push(`${req.headers.host} ${req.url}`)
    if (req.url === '/slow') {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.write('first\n')
      const timer = setTimeout(() => res.end('late\n'), 60000)
      res.on('close', () => clearTimeout(timer))
      return
    }
    res.end(`hello ${req.headers.host}\n`)
  })
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => { upstream.closeAllConnections(); upstream.close(resolve) }))
  const P = upstream.address().port

  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  const ws = tempWorkspace(t)
  writeBundle(poHome)
  const file = path.join(poHome, 'sandbox-policy.yaml')
  writeFileSync(file, [
    '# the test policy',
    'network: allowlist',
    'allow:',
    `  - first.test:${P}   # the first upstream`,
    'resolve:',
    '  first.test: 127.0.0.1',
    '  later.test: 127.0.0.1',
    '',
  ].join('\n'))
  const options = baseOptions(poHome, owner, { workspaces: [{ id: 'policy', path: ws }], env: cleanEnv({}, hostEnv()) })
  const { layer, events } = openLayer(options)
  const status = await layer.provider.ready()
  assert.equal(status.workspaces[0].state, 'running', JSON.stringify(status.workspaces[0]))
  const c = status.workspaces[0].container

  // The file's host is reached; another is denied with the command that allows it.
  const first = await probe(c.containerId, `http://first.test:${P}/hello`)
  assert.match(first.stdout, new RegExp(`^status 200\\nhello first\\.test:${P}\\n`), first.stderr)
  const denied = await probe(c.containerId, `http://later.test:${P}/hello`)
  assert.match(denied.stdout, /^status 403\n/, denied.stderr)
  assert.ok(denied.stdout.includes(`egress denied: later.test:${P} is not in networkAllow (the sandbox policy); the person can allow it on the host: po-sandbox allow later.test:${P}`), denied.stdout)
  assert.ok(!seen.some((s) => s.startsWith('later.test')))
  // Every process gets the proxy, not only pi's: a plain command run in the container (busybox
  // wget reads http_proxy) reaches the allowed host through the bridge that lives with it.
  const wget = await run('docker', ['exec', c.containerId, 'wget', '-q', '-O', '-', `http://first.test:${P}/by-exec`])
  assert.equal(wget.code, 0, wget.stderr)
  assert.equal(wget.stdout, `hello first.test:${P}\n`)
  const refusedWget = await run('docker', ['exec', c.containerId, 'wget', '-q', '-O', '-', `http://later.test:${P}/by-exec`])
  assert.notEqual(refusedWget.code, 0)
  assert.ok(!seen.some((s) => s.startsWith('later.test')))
  const checked = await po(['policy', 'check', `later.test:${P}`, '--po-home', poHome])
  assert.equal(checked.code, 1, checked.stdout)
  assert.match(checked.stdout, new RegExp(`later\\.test:${P} is denied: no entry of the allow list \\(sandbox-policy\\.yaml line 3\\)\\. To allow it: po-sandbox allow later\\.test:${P}`))

  // allow: the file edited (its comments kept), the same container reaches it, no restart.
  const applied = events.filter((e) => e.type === 'policy').length
  const allowed = await po(['allow', `later.test:${P}`, '--po-home', poHome])
  assert.equal(allowed.code, 0, allowed.stderr)
  assert.match(allowed.stdout, new RegExp(`later\\.test:${P} added to the allow list of every workspace`))
  const text = readFileSync(file, 'utf8')
  assert.ok(text.includes('# the test policy') && text.includes('# the first upstream'), text)
  assert.ok(text.includes(`  - later.test:${P}\n`), text)
  await waitFor(() => events.filter((e) => e.type === 'policy').length > applied, 'the policy applied event', 2000)
  const event = events.filter((e) => e.type === 'policy').at(-1)
  assert.equal(event.state, 'applied', JSON.stringify(event))
  const later = await probe(c.containerId, `http://later.test:${P}/hello`)
  assert.match(later.stdout, new RegExp(`^status 200\\nhello later\\.test:${P}\\n`), later.stderr)
  assert.equal(layer.provider.status().workspaces[0].container.containerId, c.containerId)

  // deny: a connection open to it is closed, and a new one is denied.
  const held = probe(c.containerId, `http://later.test:${P}/slow`, true)
  t.after(() => held.child.kill())
  await waitFor(() => held.out().includes('open'), 'the held connection open', 20000)
  const before = events.filter((e) => e.type === 'policy').length
  const deniedAgain = await po(['deny', `later.test:${P}`, '--po-home', poHome])
  assert.equal(deniedAgain.code, 0, deniedAgain.stderr)
  await waitFor(() => held.out().includes('closed'), 'the held connection closed by the deny', 5000)
  assert.ok(events.filter((e) => e.type === 'policy').length > before)
  const refused = await probe(c.containerId, `http://later.test:${P}/hello`)
  assert.match(refused.stdout, /^status 403\n/)

  // A broken file: nothing changes, the hub says where, and check names the line and field.
  const broken = events.filter((e) => e.type === 'policy').length
  writeFileSync(file, `network: allowlist\nallow:\n  - first.test:${P}\n  - later.test\n`)
  await waitFor(() => events.filter((e) => e.type === 'policy').length > broken, 'the invalid event', 3000)
  const invalid = events.filter((e) => e.type === 'policy').at(-1)
  assert.equal(invalid.state, 'invalid')
  assert.match(invalid.message, /line 4, allow\[1\]: "later\.test" is not an allow entry .*names no port.*the last good policy stays in force/)
  const check = await po(['policy', 'check', '--po-home', poHome, '--json'])
  assert.equal(check.code, 1)
  const answer = JSON.parse(check.stdout)
  assert.deepEqual([answer.ok, answer.line, answer.field], [false, 4, 'allow[1]'])
  const stillFirst = await probe(c.containerId, `http://first.test:${P}/hello`)
  assert.match(stillFirst.stdout, /^status 200\n/)
  const stillDenied = await probe(c.containerId, `http://later.test:${P}/hello`)
  assert.match(stillDenied.stdout, /^status 403\n/)
  // allow on a broken file refuses, naming the problem, and writes nothing.
  const onBroken = await po(['allow', 'x.test', '--po-home', poHome])
  assert.equal(onBroken.code, 1)
  assert.match(onBroken.stderr, /line 4, allow\[1\].*\[POLICY_INVALID\]/)
  assert.equal(readFileSync(file, 'utf8'), `network: allowlist\nallow:\n  - first.test:${P}\n  - later.test\n`)

  // log: the denials this test caused, grouped by destination, with the allowing command.
  const log = await po(['policy', 'log', '--po-home', poHome, '--json'])
  assert.equal(log.code, 0, log.stderr)
  const groups = JSON.parse(log.stdout).denials
  const laterDenials = groups.find((g) => g.destination === `later.test:${P}`)
  assert.ok(laterDenials && laterDenials.count >= 3, JSON.stringify(groups))
  assert.deepEqual(laterDenials.workspaces, ['policy'])
  assert.match(laterDenials.lastReason, /is not in networkAllow/)
  assert.ok(!groups.some((g) => g.destination === `first.test:${P}`), JSON.stringify(groups))
  const logText = await po(['policy', 'log', '--workspace', 'policy', '--po-home', poHome])
  assert.match(logText.stdout, new RegExp(`later\\.test:${P} {2}\\d+ denials, the last \\d+ s ago \\(policy\\)\\n.*\\n {4}To allow it: po-sandbox allow later\\.test:${P}\\n`))

  // show: each value and where it comes from (a variable beats the file).
  writeFileSync(file, `network: allowlist\nallow:\n  - first.test:${P}\n`)
  const show = await po(['policy', 'show', '--po-home', poHome, '--json'], { PO_SANDBOX_NETWORK_RESOLVE: 'first.test=127.0.0.2' })
  assert.equal(show.code, 0, show.stderr)
  const values = Object.fromEntries(JSON.parse(show.stdout).values.map((v) => [v.name, v]))
  assert.deepEqual(values.network, { name: 'network', value: 'allowlist', source: 'sandbox-policy.yaml line 1' })
  assert.deepEqual(values.allow, { name: 'allow', value: `first.test:${P}`, source: 'sandbox-policy.yaml line 2' })
  assert.deepEqual(values.resolve, { name: 'resolve', value: 'first.test=127.0.0.2', source: 'the variable PO_SANDBOX_NETWORK_RESOLVE' })
  // The workspace's own list, through its folder.
  const own = await po(['allow', `later.test:${P}`, ws, '--po-home', poHome])
  assert.equal(own.code, 0, own.stderr)
  const ownCheck = await po(['policy', 'check', `later.test:${P}`, ws, '--po-home', poHome])
  assert.equal(ownCheck.code, 0, ownCheck.stdout)
  assert.match(ownCheck.stdout, /allowed, by the entry later\.test:\d+ of workspace .*'s list \(sandbox-policy\.yaml line \d+\)/)

  // A container-side value: said pending by the running hub; the hub's next start replaces
  // the container, saying why.
  const pendingFrom = events.length
  writeFileSync(file, `network: none\nallow:\n  - first.test:${P}\n`)
  await waitFor(() => events.slice(pendingFrom).some((e) => e.type === 'policy' && e.state === 'pending'), 'the pending event', 3000)
  const pending = events.slice(pendingFrom).find((e) => e.type === 'policy' && e.state === 'pending')
  assert.match(pending.message, /the network mode is now none \(sandbox-policy\.yaml line 1\); the running containers keep allowlist until the hub starts again, which replaces them/)
  const values2 = JSON.parse((await po(['policy', 'show', '--po-home', poHome, '--json'])).stdout).values
  assert.deepEqual(values2.find((v) => v.name === 'guardedPaths').source, 'the default')
  const restarted = openLayer(options)
  const s3 = await restarted.layer.provider.ready()
  assert.equal(s3.workspaces[0].state, 'running', JSON.stringify(s3.workspaces[0]))
  assert.notEqual(s3.workspaces[0].container.containerId, c.containerId)
  const replaced = restarted.events.find((e) => e.type === 'workspace' && e.state === 'replaced')
  assert.ok(replaced, JSON.stringify(restarted.events.filter((e) => e.type === 'workspace')))
  assert.match(replaced.reason, /network mode is allowlist, not none/)

  // init: a preset in a new home; never over a file.
  const home2 = tempDir(t, 'po-policy-init-')
  const init = await po(['policy', 'init', 'balanced', '--po-home', home2])
  assert.equal(init.code, 0, init.stderr)
  assert.match(readFileSync(path.join(home2, 'sandbox-policy.yaml'), 'utf8'), /network: allowlist\nallow:\n {2}- registry\.npmjs\.org:443\n/)
  const again = await po(['policy', 'init', 'closed', '--po-home', home2])
  assert.equal(again.code, 1)
  assert.match(again.stdout, /is there already/)
  const bad = await po(['policy', 'init', 'lax', '--po-home', home2])
  assert.equal(bad.code, 1)
  assert.match(bad.stderr, /"lax" is not a preset: use 'open', 'balanced' or 'closed' \[OPTIONS_INVALID\]/)
  // A hub whose file is broken does not start: POLICY_INVALID naming the line.
  writeFileSync(path.join(home2, 'sandbox-policy.yaml'), 'network: closed\n')
  const owner2 = newOwner()
  cleanupOwner(t, owner2)
  const second = openLayer(baseOptions(home2, owner2, { workspaces: [{ id: 'p2', path: tempWorkspace(t) }], env: cleanEnv({}, hostEnv()) }))
  const s2 = await second.layer.provider.ready()
  assert.equal(s2.code, 'POLICY_INVALID', JSON.stringify(s2))
  assert.match(s2.reason, /line 1, network: "closed" is not a network mode/)
  assert.equal(addon.sandboxPolicy({ command: 'check', poHome: home2 }).field, 'network')
  const doctor = await addon.doctor(process.version, { poHome: home2, env: cleanEnv({}, hostEnv()) })
  assert.equal(doctor.ok, false)
  assert.match(doctor.policyProblem, /line 1, network: "closed" is not a network mode/)
  assert.match(doctor.text, /\nPolicy {4}NOT GOOD: .*line 1, network/)
  assert.match(doctor.text, /fix the policy file \(see Policy above\)/)
})
