// First run and standalone use, against the real Docker engine and the local test base image:
// `po-sandbox up` / `exec` / `down` on a folder (exit codes, stdin/stdout/stderr, a TTY session
// through a pseudo-terminal, the broker's environment with no real key, a brokered call during
// `exec` reaching a fake upstream on 127.0.0.1 with the real key, `exec` waiting at the network
// rules' gate in a container whose start has not seen them), and `po-sandbox demo` (what
// `npm start` runs) leaving nothing behind; the real pi run through `exec`.
import { test, before } from 'node:test'
import { execFileSync, spawn } from 'node:child_process'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { cpSync, mkdirSync, readdirSync, realpathSync } from 'node:fs'
import path from 'node:path'

import { addon, dockerCli, homeOwner, requireDocker, root, run, tempDir, waitFor } from './helpers.mjs'
import { startUpstream } from './upstreams.mjs'

const cli = path.join(root, 'bin', 'po-sandbox.js')
const TEST_BASE = 'po-sandbox-test-base:node24-nft'
const IMAGE = ['--base-image', TEST_BASE, '--image-variant', 'minimal']

before(async () => {
  await requireDocker()
  const r = await run('bash', [path.join(root, 'scripts/build-test-base-image.sh')])
  assert.equal(r.code, 0, `build-test-base-image.sh failed:\n${r.stderr}`)
})

/** A clean environment for the CLI: no PO_SANDBOX, this Node on PATH, `extra` added. */
function cliEnv(extra = {}) {
  const env = { ...process.env, ...extra }
  for (const k of ['PO_SANDBOX', 'PO_WORKSPACE', 'PO_BROKER_PROVIDERS', 'PO_BROKER_SOCKET', 'PO_BROKER_ADDRESS', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL']) if (!(k in extra)) delete env[k]
  return env
}

function po(args, { env, input } = {}) {
  return run(process.execPath, [cli, ...args], { env: env ?? cliEnv(), input })
}

/** A folder and a Po home; the folder's sandbox (container and volumes) is removed at the end. */
function sandboxFolder(t, name = 'project') {
  const dir = tempDir(t, 'po-first-run-')
  const folder = path.join(dir, name)
  mkdirSync(folder)
  const poHome = path.join(dir, 'po-home')
  const owner = homeOwner(poHome)
  const ws = addon.workspaceForFolder(folder)
  t.after(() => addon.stopSandboxContainers({ poHome, owner, workspace: ws.id, removeVolumes: true }))
  return { folder, poHome, ws, owner }
}

test('workspaceForFolder: a stable id from the folder, a coded error for a missing one', (t) => {
  const dir = tempDir(t)
  const a = addon.workspaceForFolder(dir)
  assert.deepEqual(addon.workspaceForFolder(`${dir}/`), a)
  assert.equal(a.path, realpathSync(dir))
  assert.match(a.id, /^po-sandbox-test-[A-Za-z0-9]+-[0-9a-f]{12}$/)
  assert.throws(() => addon.workspaceForFolder(path.join(dir, 'missing')), (e) => e.code === 'WORKSPACE_INVALID' && e.message.includes('missing'))
})

test('usage errors exit 2 before anything runs; a missing folder is WORKSPACE_INVALID', async (t) => {
  for (const args of [['exec'], ['exec', '.', '--'], ['up', 'a', 'b'], ['down', '--', 'x'], ['ls', '--', 'x']]) {
    const r = await po(args)
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, /Usage: po-sandbox/)
  }
  const missing = path.join(tempDir(t), 'nope')
  const r = await po(['up', missing, '--json'])
  assert.equal(r.code, 1)
  assert.equal(JSON.parse(r.stdout).error.code, 'WORKSPACE_INVALID')
  const e = await po(['exec', missing, '--', 'true'])
  assert.equal(e.code, 125, e.stderr)
  assert.match(e.stderr, /WORKSPACE_INVALID/)
})

test('up, exec and down on a folder: the demo bundle, exit codes, streams, a TTY, brokered credentials', async (t) => {
  const { folder, poHome, ws } = sandboxFolder(t)
  const upstream = await startUpstream({ name: 'first-run', t })
  const realKey = `sk-ant-api03-${randomBytes(24).toString('hex')}`
  const env = cliEnv({ ANTHROPIC_API_KEY: realKey, ANTHROPIC_BASE_URL: upstream.origin })
  const common = ['--po-home', poHome, ...IMAGE]
  // After up, exec finds the running container's recipe by itself (no image options).
  const home = ['--po-home', poHome]

  // A command before up: a coded error saying to run up.
  const early = await po(['exec', folder, ...common, '--', 'true'], { env })
  assert.equal(early.code, 125)
  assert.match(early.stderr, /SANDBOX_NOT_RUNNING/)
  assert.ok(early.stderr.includes(`po-sandbox up ${folder}`), early.stderr)

  // up --json: quiet (no progress), the demo bundle, a hardened container answering.
  const first = await po(['up', folder, ...common, '--json'], { env })
  assert.equal(first.code, 0, first.stderr)
  assert.equal(first.stderr, '')
  const out = JSON.parse(first.stdout)
  assert.equal(out.demo, true)
  assert.equal(out.workspace.id, ws.id)
  const c = out.container
  assert.equal(c.adopted, false)
  assert.equal(c.posture.noCapabilities, true)
  assert.equal(c.posture.noNewPrivileges, true)
  assert.equal(c.posture.user, `${process.getuid()}:${process.getgid()}`)
  assert.deepEqual(c.posture.published, ['127.0.0.1 -> 7300/tcp'])
  const status = await (await fetch(`${c.url}/api/status`)).json()
  assert.equal(status.contained, true)
  assert.equal(status.bundle, 'demo')
  assert.equal(status.workspace, ws.id)
  assert.equal(status.workspacePath, ws.path)
  assert.deepEqual(status.brokeredProviders, ['anthropic'])
  assert.match(status.privileges.effectiveCapabilities, /^0+$/)
  // The guarded paths, as mounted (no repository in this folder: .git itself).
  assert.ok(status.guardedPaths.includes(`${ws.path}/.mcp.json`) && status.guardedPaths.includes(`${ws.path}/.git`), JSON.stringify(status.guardedPaths))
  const html = await (await fetch(c.url)).text()
  assert.match(html, /demo runtime bundle/)
  assert.ok(html.includes(`${ws.path}/.mcp.json`), 'the status page lists the guarded paths')

  // up again: adopted, and the text names the URL and posture.
  const again = await po(['up', folder, ...common], { env })
  assert.equal(again.code, 0, again.stderr)
  assert.match(again.stdout, /adopted/)
  assert.ok(again.stdout.includes(c.url), again.stdout)
  assert.match(again.stdout, /all capabilities dropped; no-new-privileges/)
  assert.match(again.stdout, /embedded demo bundle/)

  // exec without a terminal: stdin in, stdout and stderr apart, the exit code out, in the folder.
  const piped = await po(['exec', folder, ...home, '--', 'sh', '-c', 'pwd; id -u; cat; echo to-stderr >&2; exit 7'], { env, input: 'from-stdin\n' })
  assert.equal(piped.code, 7, piped.stderr)
  assert.equal(piped.stdout, `${ws.path}\n${process.getuid()}\nfrom-stdin\n`)
  assert.equal(piped.stderr, 'to-stderr\n')

  // The broker's environment: a token, never the key.
  const envOut = await po(['exec', folder, ...home, '--', 'env'], { env })
  assert.equal(envOut.code, 0, envOut.stderr)
  assert.match(envOut.stdout, /^PO_SANDBOX=1$/m)
  assert.match(envOut.stdout, /^PO_BROKER_PROVIDERS=anthropic$/m)
  assert.match(envOut.stdout, /^PO_BROKER_SOCKET=\/run\/po-broker\//m)
  const token = envOut.stdout.match(/^ANTHROPIC_API_KEY=(.*)$/m)?.[1]
  assert.ok(token && token !== realKey, 'the container holds a token in the key variable')
  assert.ok(!envOut.stdout.includes(realKey), 'the real key is inside the container')

  // A call made inside during exec goes through this exec's broker to the fake upstream, which
  // sees the real key and never the token.
  const call = `const r=require('http').request({socketPath:process.env.PO_BROKER_SOCKET,path:'/anthropic/v1/messages',method:'POST',headers:{'x-api-key':process.env.ANTHROPIC_API_KEY,'content-type':'application/json','anthropic-version':'2023-06-01'}},(res)=>{let b='';res.on('data',(d)=>{b+=d});res.on('end',()=>{console.log('status '+res.statusCode);process.exit(res.statusCode===200?0:3)})});r.end(JSON.stringify({model:'claude-x',max_tokens:8,stream:true,messages:[{role:'user',content:'ping'}]}))`
  const brokered = await po(['exec', folder, ...home, '--', 'node', '-e', call], { env })
  assert.equal(brokered.code, 0, `${brokered.stdout}\n${brokered.stderr}`)
  assert.match(brokered.stdout, /status 200/)
  const seen = upstream.requests.filter((r) => r.path === '/v1/messages')
  assert.equal(seen.length, 1)
  assert.equal(seen[0].headers['x-api-key'], realKey)
  assert.ok(!JSON.stringify(seen[0]).includes(token), 'the upstream saw the token')

  // A TTY session through a pseudo-terminal (util-linux `script`): a terminal inside, input
  // typed in, the exit code out.
  const line = [process.execPath, cli, 'exec', folder, ...home, '--', 'sh', '-c', 'test -t 0 && test -t 1 && echo is-a-tty; read answer; echo "got:$answer"; exit 5']
  const quoted = line.map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ')
  const session = await run('script', ['-q', '-e', '-c', quoted, '/dev/null'], { env, input: 'typed-in\n' })
  assert.equal(session.code, 5, `${session.stdout}\n${session.stderr}`)
  assert.match(session.stdout, /is-a-tty/)
  assert.match(session.stdout, /got:typed-in/)

  // exec waits at the network rules' gate, as the workspace's own command does, in a container
  // whose start has not seen them: here it restarted into its namespace after the host's root
  // removed them there (the rules record and the holder's health still say loaded, as they do
  // where a runtime's network is not the namespace's: gVisor's netstack). Without the gate the
  // command runs at once, with no rules (the marker answers ECONNREFUSED); with it, it says it
  // waits, runs once the rules are back, and sees them (EHOSTUNREACH).
  const holder = JSON.parse(dockerCli(['inspect', dockerCli(['inspect', '-f', '{{.HostConfig.NetworkMode}}', c.containerId]).replace(/^container:/, '')]))[0]
  const rules = holder.Config.Env.find((e) => e.startsWith('PO_NET_RULES=')).slice('PO_NET_RULES='.length)
  const nft = (args, input) => execFileSync('nsenter', ['-t', String(holder.State.Pid), '-n', 'nft', ...args], { input })
  nft(['delete', 'table', 'inet', 'po_sandbox'])
  dockerCli(['restart', '-t', '0', c.containerId])
  const marker = "require('net').connect({host:'127.80.79.78',port:9}).on('error',(e)=>console.log(e.code))"
  const gated = spawn(process.execPath, [cli, 'exec', folder, ...home, '--', 'node', '-e', marker], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  const held = { stdout: '', stderr: '', code: undefined }
  gated.stdout.on('data', (d) => { held.stdout += d })
  gated.stderr.on('data', (d) => { held.stderr += d })
  const ended = new Promise((resolve) => gated.once('close', (code) => { held.code = code; resolve(code) }))
  t.after(() => gated.kill())
  const waiting = () => {
    assert.equal(held.code, undefined, `exec ran without waiting for the rules:\n${held.stdout}\n${held.stderr}`)
    return /po-sandbox: waiting for the network rules of the namespace holder/.test(held.stderr)
  }
  await waitFor(waiting, 'exec saying it waits for the network rules', 30000)
  await new Promise((r) => setTimeout(r, 1500))
  assert.equal(held.code, undefined, 'exec ended while the rules were still missing')
  assert.equal(held.stdout, '', 'the command ran without the rules')
  nft(['-f', '-'], rules)
  assert.equal(await ended, 0, held.stderr)
  assert.equal(held.stdout, 'EHOSTUNREACH\n')

  // Every exec adopted the very container up started: nothing was replaced.
  assert.equal(dockerCli(['ps', '-q', '--no-trunc', '--filter', `label=po.workspace=${ws.id}`]), c.containerId)

  // down: the container goes, its volumes stay; exec then says to run up.
  const d = await po(['down', folder, '--po-home', poHome], { env })
  assert.equal(d.code, 0, d.stderr)
  assert.match(d.stdout, /volumes are kept/)
  assert.equal(dockerCli(['ps', '-aq', '--filter', `label=po.workspace=${ws.id}`]), '')
  assert.equal(dockerCli(['volume', 'ls', '-q', '--filter', `label=po.workspace=${ws.id}`]).split('\n').length, 3)
  const after = await po(['exec', folder, ...home, '--', 'true'], { env })
  assert.equal(after.code, 125)
  assert.match(after.stderr, /SANDBOX_NOT_RUNNING/)
  const twice = await po(['down', folder, '--po-home', poHome])
  assert.equal(twice.code, 0)
  assert.match(twice.stdout, /nothing to stop/)
})

test("exec runs nothing in a container that only carries the sandbox's name: another owner's, or another folder's, is refused with SANDBOX_NOT_RUNNING", async (t) => {
  // The Po home's owner id, as its file keeps it (every command of this Po home takes it).
  const { folder, poHome, ws, owner } = sandboxFolder(t)
  const name = `po-${owner}-${ws.id}`
  const other = path.join(path.dirname(folder), 'other')
  mkdirSync(other)
  const impostor = (labels) => {
    const flags = Object.entries({ 'po.sandbox': '1', 'po.workspace': ws.id, ...labels }).flatMap(([k, v]) => ['--label', `${k}=${v}`])
    return dockerCli(['run', '-d', '--name', name, ...flags, IMAGE[1], 'sleep', '300'])
  }
  t.after(() => { try { dockerCli(['rm', '-f', name]) } catch {} })
  const home = ['--po-home', poHome]
  // Another owner's container under this name: left alone, and nothing runs in it.
  const foreign = impostor({ 'po.owner': 'someoneelse', 'po.workspace-path': folder })
  const r1 = await po(['exec', folder, ...home, '--', 'sh', '-c', 'echo ran-inside'])
  assert.equal(r1.code, 125, r1.stderr)
  assert.match(r1.stderr, /SANDBOX_NOT_RUNNING/)
  assert.doesNotMatch(r1.stdout, /ran-inside/)
  assert.equal(dockerCli(['inspect', '-f', '{{.State.Running}}', foreign]), 'true')
  dockerCli(['rm', '-f', foreign])
  // This owner's and workspace's labels, another folder's path: not this folder's sandbox.
  impostor({ 'po.owner': owner, 'po.workspace-path': other })
  const r2 = await po(['exec', folder, ...home, '--', 'sh', '-c', 'echo ran-inside'])
  assert.equal(r2.code, 125, r2.stderr)
  assert.match(r2.stderr, /SANDBOX_NOT_RUNNING/)
  assert.doesNotMatch(r2.stdout, /ran-inside/)
})

/** The CLI inside util-linux `script`'s pseudo-terminal of `rows` x `cols`; resolves when it ends.
 * `onOutput(text, write)` sees the output so far and may type into the terminal. */
function inTerminal(args, { env, rows, cols, onOutput = () => {} }) {
  const quoted = [process.execPath, cli, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ')
  const child = spawn('script', ['-q', '-e', '-c', `stty rows ${rows} cols ${cols}; exec ${quoted}`, '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => { stdout += d; onOutput(stdout, (text) => child.stdin.write(text)) })
  child.stderr.on('data', (d) => { stderr += d })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => { child.stdin.destroy(); resolve({ code, stdout, stderr }) })
  })
}

test('exec with a terminal: the size of the terminal inside, Ctrl-C interrupts the command, its code comes back', async (t) => {
  const { folder, poHome } = sandboxFolder(t, 'tty-project')
  const started = await po(['up', folder, '--po-home', poHome, ...IMAGE, '--json'])
  assert.equal(started.code, 0, started.stderr)

  // The size is set before any input reaches the command: it reads a line first.
  let entered = false
  const sized = await inTerminal(['exec', folder, '--po-home', poHome, '--', 'sh', '-c', 'echo ready; read line; stty size'], {
    env: cliEnv(),
    rows: 33,
    cols: 101,
    onOutput: (text, write) => {
      if (!entered && text.includes('ready')) { entered = true; write('\r') }
    },
  })
  assert.equal(sized.code, 0, `${sized.stdout}\n${sized.stderr}`)
  assert.match(sized.stdout, /^33 101\r?$/m)

  // Ctrl-C typed once the command runs: the shell inside gets SIGINT (exit 130), not po-sandbox.
  let typed = false
  // (A marker of its own: the exec gate's notice, should it wait for the rules, says "waiting".)
  const interrupted = await inTerminal(['exec', folder, '--po-home', poHome, '--', 'sh', '-c', 'echo po-tty-sleeps; sleep 60; echo not-interrupted'], {
    env: cliEnv(),
    rows: 24,
    cols: 80,
    onOutput: (text, write) => {
      if (!typed && text.includes('po-tty-sleeps')) { typed = true; write('\x03') }
    },
  })
  assert.ok(typed, `${interrupted.stdout}\n${interrupted.stderr}`)
  assert.equal(interrupted.code, 130, `${interrupted.stdout}\n${interrupted.stderr}`)
  assert.doesNotMatch(interrupted.stdout, /not-interrupted/)
})

test('up shows the image build as step lines on a terminal, and nothing but JSON with --json', async (t) => {
  // Fresh tags of the test base: each gives a new image digest, so each up builds.
  const plain = async (kind, json) => {
    const base = `po-sandbox-test-base:progress-${kind}-${process.pid}`
    const { folder, poHome, ws, owner } = sandboxFolder(t, `progress-${kind}`)
    dockerCli(['tag', TEST_BASE, base])
    let image
    t.after(async () => {
      // The container first: an image in use cannot be removed.
      await addon.stopSandboxContainers({ poHome, owner, workspace: ws.id, removeVolumes: true })
      await run('docker', ['rmi', '-f', base, ...(image ? [image] : [])])
    })
    const r = await inTerminal(['up', folder, '--po-home', poHome, '--base-image', base, '--image-variant', 'minimal', ...(json ? ['--json'] : [])], { env: cliEnv(), rows: 24, cols: 120 })
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`)
    image = r.stdout.match(/po-sandbox:[0-9a-f]{24}/)?.[0]
    assert.ok(image, r.stdout)
    return r.stdout
  }
  const text = await plain('text', false)
  assert.match(text, /Building the sandbox image po-sandbox:[0-9a-f]{24} \(once; later runs reuse it\)/)
  assert.match(text, /^ {2}Step 1\/\d+ : FROM /m)
  assert.match(text, /^Built po-sandbox:/m)
  assert.match(text, /Sandbox started for/)
  const json = await plain('json', true)
  // The terminal shows stdout and stderr together: only the JSON object is there.
  assert.equal(JSON.parse(json).ok, true)
})

test('exec -- pi runs the real pi inside the sandbox (copied in once): its model call reaches a fake upstream with the real key, the container only ever held a token; on a terminal the interactive pi inside answers a typed prompt through the broker and quits with /quit', async (t) => {
  const { folder, poHome, ws } = sandboxFolder(t, 'pi-project')
  const upstream = await startUpstream({ name: 'pi-upstream', t })
  const realKey = `sk-ant-api03-${randomBytes(24).toString('hex')}`
  const env = cliEnv({ ANTHROPIC_API_KEY: realKey, ANTHROPIC_BASE_URL: upstream.origin })
  const started = await po(['up', folder, '--po-home', poHome, ...IMAGE, '--json'], { env })
  assert.equal(started.code, 0, started.stderr)
  const containerId = JSON.parse(started.stdout).container.containerId

  // The test image has no pi of its own: the host's is copied into the home volume, once.
  const piArgs = ['pi', '-p', '--no-session', '--provider', 'anthropic', '--model', 'claude-haiku-4-5']
  const r = await po(['exec', folder, '--po-home', poHome, '--', ...piArgs, 'ping'], { env })
  assert.equal(r.code, 0, `pi in the sandbox failed:\nstdout: ${r.stdout}\nstderr: ${r.stderr}`)
  assert.match(r.stdout, /pong from pi-upstream/)
  assert.match(r.stderr, /Copying pi into the sandbox's home volume/)
  const again = await po(['exec', folder, '--po-home', poHome, '--', ...piArgs, 'ping again'], { env })
  assert.equal(again.code, 0, again.stderr)
  assert.match(again.stdout, /pong from pi-upstream/)
  assert.doesNotMatch(again.stderr, /Copying pi/, 'the second run reuses the copy')
  // The copy belongs to the container's user (this uid), is whole, and holds no key.
  const listed = dockerCli(['exec', containerId, 'sh', '-c', 'ls -d /po-home/.po-sandbox/pi/*/*; stat -c %u /po-home/.po-sandbox/pi/*/*/pi/package.json; ls /po-home/.po-sandbox/pi/*/ | grep -c tmp- || true'])
  const [dir, owner, tmps] = listed.split('\n')
  assert.match(dir, /^\/po-home\/\.po-sandbox\/pi\/[0-9a-f]{16}\/x86_64$/)
  assert.equal(Number(owner), process.getuid())
  assert.equal(tmps, '0')
  assert.equal(dockerCli(['exec', containerId, 'sh', '-c', `grep -rl ${realKey} /po-home /tmp 2>/dev/null | wc -l`]), '0')

  const seen = upstream.requests.filter((q) => q.api === 'anthropic-messages')
  assert.ok(seen.length >= 2, JSON.stringify(upstream.requests))
  const inspected = JSON.parse(dockerCli(['inspect', containerId]))[0]
  const token = inspected.Config.Env.find((kv) => kv.startsWith('ANTHROPIC_API_KEY='))?.split('=')[1]
  assert.ok(token && token !== realKey)
  assert.ok(!inspected.Config.Env.some((kv) => kv.includes(realKey)), 'the real key is in the container')
  for (const q of seen) {
    assert.equal(q.headers['x-api-key'], realKey)
    assert.ok(!JSON.stringify(q).includes(token), 'the upstream saw the token')
  }
  assert.equal(ws.id, JSON.parse(started.stdout).workspace.id)

  // The interactive pi on a terminal, in the same sandbox (its copy of pi).
  const printed = upstream.requests.filter((q) => q.api === 'anthropic-messages').length
  let step = 0
  const session = await inTerminal(['exec', folder, '--po-home', poHome, '--', 'pi', '--no-session', '--provider', 'anthropic', '--model', 'claude-haiku-4-5'], {
    env,
    rows: 40,
    cols: 120,
    onOutput: (text, write) => {
      // The TUI is up once it shows the model; the answer, then /quit. A prompt typed before the
      // TUI takes the terminal raw can be flushed (seen on a busy machine): typed again every 5 s
      // until pi answers, at most five times.
      if (step === 0 && /claude-haiku-4-5/.test(text)) {
        step = 1
        let tries = 0
        const type = () => { if (step === 1 && tries++ < 5) { write('ping\r'); setTimeout(type, 5000) } }
        setTimeout(type, 300)
      }
      if (step === 1 && /pong from pi-upstream/.test(text)) { step = 2; setTimeout(() => write('/quit\r'), 300) }
    },
  })
  assert.equal(step, 2, `pi did not answer on the terminal:\n${session.stdout}\n${session.stderr}`)
  assert.equal(session.code, 0, `${session.stdout}\n${session.stderr}`)
  assert.ok(upstream.requests.filter((q) => q.api === 'anthropic-messages').length > printed, JSON.stringify(upstream.requests))
})

test('exec -- pi with no pi in the image and none on the host: PI_NOT_FOUND, exit 125, nothing copied', async (t) => {
  const { folder, poHome } = sandboxFolder(t, 'no-pi')
  // This package on its own (no node_modules beside it) and a PATH with only this Node.
  const pkg = path.join(tempDir(t, 'po-no-pi-'), 'pkg')
  for (const f of ['package.json', 'index.js', 'bin', 'extensions', ...readdirSync(root).filter((n) => n.endsWith('.node'))]) {
    cpSync(path.join(root, f), path.join(pkg, f), { recursive: true })
  }
  const env = { ...cliEnv(), PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` }
  const started = await po(['up', folder, '--po-home', poHome, ...IMAGE, '--json'], { env })
  assert.equal(started.code, 0, started.stderr)
  const r = await run(process.execPath, [path.join(pkg, 'bin', 'po-sandbox.js'), 'exec', folder, '--po-home', poHome, '--', 'pi', '-p', 'hi'], { env })
  assert.equal(r.code, 125, r.stderr)
  assert.match(r.stderr, /no `pi` and none is installed on this host.*npm install -g @earendil-works\/pi-coding-agent.*\[PI_NOT_FOUND\]/s)
  const containerId = JSON.parse(started.stdout).container.containerId
  assert.equal(dockerCli(['exec', containerId, 'sh', '-c', 'ls -A /po-home/.po-sandbox 2>/dev/null | wc -l']), '0')
})

test('po-sandbox demo (npm start): doctor, a contained demo sandbox answering, then nothing left', async () => {
  const r = await po(['demo'])
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`)
  assert.match(r.stdout, /Runtime {3}the embedded demo bundle: ok/)
  assert.match(r.stdout, /Inside, the demo server reports: contained \(PO_SANDBOX=1\)/)
  // The real pi inside (the host's, copied in) runs its /po-sandbox: contained, this workspace.
  const said = r.stdout.match(/^Inside, pi's \/po-sandbox says: This session runs inside a sandbox container, for workspace "(\S+)"\.$/m)
  assert.ok(said, r.stdout)
  assert.match(r.stdout, /The sandbox layer works on this machine\./)
  const id = r.stdout.match(/^ {2}Workspace {3}(\S+)$/m)?.[1]
  assert.ok(id, r.stdout)
  assert.equal(said[1], id)
  assert.equal(dockerCli(['ps', '-aq', '--filter', `label=po.workspace=${id}`]), '')
  assert.equal(dockerCli(['volume', 'ls', '-q', '--filter', `label=po.workspace=${id}`]), '')
  const folder = r.stdout.match(/for (\/\S+) \(workspace \S+\)\.\.\.$/m)?.[1]
  assert.ok(folder, r.stdout)
  assert.throws(() => realpathSync(path.dirname(folder)), 'the throw-away folder is removed')
})

test('po-sandbox demo interrupted with Ctrl-C (SIGINT) while the sandbox starts: exit 130, nothing left', async () => {
  const child = spawn(process.execPath, [cli, 'demo'], { env: cliEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  let id
  let sent = false
  child.stdout.on('data', (d) => {
    stdout += d
    id ??= stdout.match(/\(workspace (\S+)\)\.\.\.$/m)?.[1]
    // Twice: a second Ctrl-C does not cut the clean-up short.
    if (id && !sent) { sent = true; child.kill('SIGINT'); child.kill('SIGINT') }
  })
  child.stderr.on('data', (d) => { stderr += d })
  const code = await new Promise((resolve) => child.once('close', resolve))
  assert.ok(id, stdout)
  assert.equal(code, 130, `${stdout}\n${stderr}`)
  assert.match(stderr, /Interrupted: removing the throw-away sandbox/)
  assert.equal(dockerCli(['ps', '-aq', '--filter', `label=po.workspace=${id}`]), '')
  assert.equal(dockerCli(['volume', 'ls', '-q', '--filter', `label=po.workspace=${id}`]), '')
  const folder = stdout.match(/for (\/\S+) \(workspace/)?.[1]
  assert.throws(() => realpathSync(path.dirname(folder)), 'the throw-away folder is removed')
})
