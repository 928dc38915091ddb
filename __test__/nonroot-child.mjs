// Run by nonroot.test.mjs as its unprivileged user (never directly): one scenario, its facts
// printed as one JSON line on stdout. Argument: a JSON object { scenario, ... }.
import { execFileSync } from 'node:child_process'
import { lstatSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { addon } from './helpers.mjs'
import { TEST_BASE, baseOptions, hostEnv, inspect, newOwner, openLayer, writeBundle } from './provider-fixtures.mjs'

const args = JSON.parse(process.argv[2])
const out = (facts) => process.stdout.write(JSON.stringify(facts) + '\n')

/** A layer of a fresh owner on the shared engine, with the default broker folder unless given. */
function layerFor(workspace, extra = {}) {
  const poHome = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'po-nonroot-home-')))
  writeBundle(poHome)
  const owner = newOwner()
  // A key the broker carries, so the container gets a broker socket (no call goes out).
  const env = hostEnv({ OPENAI_API_KEY: `sk-REAL-${'n'.repeat(40)}`, OPENAI_BASE_URL: 'http://127.0.0.1:9' })
  const options = baseOptions(poHome, owner, { workspaces: [{ id: 'nr', path: workspace }], env, ...extra })
  if (!('brokerSocketDir' in extra)) delete options.brokerSocketDir
  return { owner, poHome, ...openLayer(options) }
}

/** The user's rootless Podman: its `podman system service` socket, the test base image it loaded. */
const PODMAN_BASE = `localhost/${TEST_BASE}`
// Rootless Podman's API service can take over 3 s (the default read bound) to answer while other
// suites run beside this one; the bound is not what these scenarios test (engine-faults does).
function podmanEnv(extra) {
  const env = hostEnv({ CONTAINER_HOST: `unix://${args.socket}`, PO_SANDBOX_ENGINE: 'podman', PO_SANDBOX_ENGINE_TIMEOUT_MS: '20000', ...extra })
  delete env.DOCKER_HOST
  return env
}
function podman(...a) {
  return execFileSync('podman', a, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

if (args.scenario === 'docker') {
  const { owner, poHome, layer } = layerFor(args.workspace)
  const status = await layer.provider.ready()
  const w = status.workspaces[0]
  const facts = { owner, poHome, uid: process.getuid(), gid: process.getgid(), state: w.state, error: w.error ?? null, containerId: w.container?.containerId ?? null }
  if (w.state === 'running') {
    // Written by the container in the workspace and in its own folders.
    const script = 'set -e; id -u > in-workspace.txt; mkdir -p made/sub; echo x > made/sub/f; for d in /po-home /po-runtime /po-git; do touch $d/probe && echo "$d ok" >&2; done; test -S /run/po-broker/broker.sock && test -w /run/po-broker/broker.sock'
    facts.execCode = await layer.containers.exec('nr', ['sh', '-c', script]).catch((e) => String(e))
    // The broker folder the container has mounted, read while this hub serves it.
    const mount = inspect(w.container.containerId).Mounts.find((m) => m.Destination === '/run/po-broker')
    if (mount) {
      // With the exec spawner's socket, once the spawner the exec started listens.
      for (let i = 0; i < 100 && !readdirSync(mount.Source).some((n) => n.startsWith('exec-')); i++) await new Promise((r) => setTimeout(r, 100))
      const at = (p) => { const st = lstatSync(p); return { uid: st.uid, mode: st.mode & 0o777, socket: st.isSocket() } }
      facts.broker = { dir: mount.Source, ...at(mount.Source), entries: Object.fromEntries(readdirSync(mount.Source).map((n) => [n, at(path.join(mount.Source, n))])) }
    }
  }
  out(facts)
  // The caller removes the container after its checks (it reads the engine's view first).
} else if (args.scenario === 'denied') {
  const r = await addon.checkEngine({ engine: 'docker', timeoutMs: 5000, env: { ...process.env, DOCKER_HOST: `unix://${args.socket}` } })
  out({ available: r.available, reasonCode: r.reasonCode ?? null, reason: r.reason ?? null })
} else if (args.scenario === 'squatted') {
  const { owner, poHome, layer } = layerFor(args.workspace, { brokerSocketDir: args.socketDir })
  const status = await layer.provider.ready()
  const w = status.workspaces[0]
  out({ owner, poHome, state: w.state, errorCode: w.errorCode ?? null, error: w.error ?? null })
} else if (args.scenario === 'podman') {
  // Rootless Podman of this user, through its own `podman system service` socket.
  const { default: http } = await import('node:http')
  const seen = []
  const upstream = http.createServer((req, res) => {
    seen.push(req.headers.authorization ?? null)
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"data":[{"id":"m1"}]}')
  })
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve))
  const REAL = `sk-REAL-rootless-${'r'.repeat(24)}`
  const poHome = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'po-nonroot-home-')))
  writeBundle(poHome)
  const owner = newOwner()
  const env = podmanEnv({ OPENAI_API_KEY: REAL, OPENAI_BASE_URL: `http://127.0.0.1:${upstream.address().port}` })
  const options = { ...baseOptions(poHome, owner, { env, workspaces: [{ id: 'rl', path: args.workspace }] }), baseImage: PODMAN_BASE }
  delete options.brokerSocketDir
  const { layer, events } = openLayer(options)
  const status = await layer.provider.ready()
  const w = status.workspaces[0]
  const facts = { events, owner, poHome, uid: process.getuid(), engine: status.engine, state: w.state, error: w.error ?? status.reason ?? null, warnings: status.warnings }
  const doctor = await addon.doctor(process.version, { env, poHome, baseImage: PODMAN_BASE, imageVariant: 'minimal', demoRuntime: true })
  facts.doctor = { rootless: doctor.engine.rootless, cgroupVersion: doctor.engine.cgroupVersion ?? null, warnings: doctor.warnings }
  if (w.state === 'running') {
    const info = JSON.parse(podman('inspect', w.container.containerId))[0]
    facts.containerId = w.container.containerId
    facts.user = info.Config.User
    facts.usernsMode = info.HostConfig.UsernsMode
    const script = 'set -e; id -u > in-workspace.txt; mkdir -p made/sub; echo x > made/sub/f; touch "$PO_HOME/from-container"; for d in /po-home /po-runtime /po-git; do touch $d/probe; done'
    facts.execCode = await layer.containers.exec('rl', ['sh', '-c', script]).catch((e) => String(e))
    facts.pFile = path.join(poHome, 'sandboxes', 'rl', 'from-container')
    // A model call from inside, through the broker socket in this user's runtime folder.
    const call = await fetch(`${w.container.url}/call`, { signal: AbortSignal.timeout(20000) }).then((r) => r.json()).catch((e) => ({ error: String(e.cause ?? e) }))
    facts.callStatus = call.status ?? null
    if (call.error) facts.callError = `${call.error}; events: ${JSON.stringify(events.filter((e) => e.type === 'workspace'))}`
    facts.upstreamSaw = seen
    facts.keyInEnv = info.Config.Env.some((kv) => kv.includes(REAL))
    facts.brokerMount = info.Mounts.find((m) => m.Destination === '/run/po-broker')?.Source ?? null
    // A second hub of the same owner (another window): adopts the container, does not replace it.
    const second = openLayer(options)
    const again = (await second.layer.provider.ready()).workspaces[0]
    facts.second = { state: again.state, containerId: again.container?.containerId ?? null, adopted: again.container?.adopted ?? null, replacedReason: again.container?.replacedReason ?? null, removed: second.events.filter((e) => e.state === 'removed') }
    facts.secondExec = await second.layer.containers.exec('rl', ['true']).catch((e) => String(e))
    // Later execs run as children of the container's spawner (issue 26), which the first exec
    // started: the command's parent inside, as it tells.
    const probe = ['sh', '-c', 'if [ "$PPID" = 0 ]; then echo engine; else tr "\\0" " " </proc/$PPID/cmdline; fi > parent.txt']
    for (let i = 0; i < 40 && !/po-sandbox-exec/.test(facts.spawnerParent ?? ''); i++) {
      facts.spawnerExec = await second.layer.containers.exec('rl', probe).catch((e) => String(e))
      try {
        facts.spawnerParent = readFileSync(path.join(args.workspace, 'parent.txt'), 'utf8')
      } catch (e) {
        facts.spawnerParent = String(e)
      }
      await new Promise((r) => setTimeout(r, 250))
    }
    // A forwarded port works on rootless Podman too (its bytes over the forward's socket in the
    // broker folder), and leaves no relay inside.
    const fwd = await layer.containers.forwardPort('rl', 7300).catch((e) => ({ error: String(e) }))
    facts.forwardUrl = fwd.url ?? fwd.error
    facts.forwardCarrier = fwd.carrier
    if (fwd.url) {
      facts.forwardUid = await fetch(`${fwd.url}/whoami`, { signal: AbortSignal.timeout(20000) }).then((r) => r.json()).then((j) => j.uid).catch((e) => String(e))
      await fwd.close()
      facts.relayLeft = podman('top', w.container.containerId, 'args').includes('po-sandbox-forward')
    }
  }
  await layer.containers.stopAll().catch(() => {})
  facts.leftContainers = podman('ps', '-a', '-q', '--filter', `label=po.owner=${owner}`).trim()
  const brokerDir = path.join(process.env.XDG_RUNTIME_DIR, 'po-broker')
  facts.leftSockets = readdirSync(brokerDir).filter((n) => n.startsWith(`${owner}-`) && !n.endsWith('.lock'))
  // The workspace's broker lock file stays by design (an empty file, released with its process).
  for (const n of readdirSync(brokerDir).filter((n) => n.startsWith(`${owner}-`) && n.endsWith('.lock'))) rmSync(path.join(brokerDir, n))
  for (const v of podman('volume', 'ls', '-q', '--filter', `label=po.owner=${owner}`).split('\n').filter(Boolean)) podman('volume', 'rm', v)
  upstream.close()
  out(facts)
} else if (args.scenario === 'podman-pi') {
  // The forced TCP route on rootless Podman, end to end with the real pi: `po-sandbox up`, then
  // `exec -- pi` (a second hub, adopting the container and serving the broker meanwhile).
  const { startUpstream } = await import('./upstreams.mjs')
  const { root, run } = await import('./helpers.mjs')
  const upstream = await startUpstream({ name: 'rootless-tcp' })
  const REAL = `sk-ant-api03-REAL-rootless-${'t'.repeat(32)}`
  const poHome = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'po-nonroot-home-')))
  const env = podmanEnv({ PO_SANDBOX_BROKER_TRANSPORT: 'tcp', ANTHROPIC_API_KEY: REAL, ANTHROPIC_BASE_URL: upstream.origin })
  for (const k of ['PO_SANDBOX', 'PO_WORKSPACE', 'PO_BROKER_PROVIDERS', 'PO_BROKER_SOCKET', 'PO_BROKER_ADDRESS']) delete env[k]
  // The git and registry routes over the same TCP route: a git server and a Verdaccio here, the
  // workspace a repository whose remote names the git host, the person's credentials.
  const services = await import('./service-fixtures.mjs')
  const cleanups = []
  const svc = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'po-nonroot-svc-')))
  const GIT_TOKEN = 'ghp_rootless-host-token-0123456789'
  writeFileSync(path.join(args.workspace, 'README'), 'hello\n')
  for (const a of [['init', '-q'], ['add', 'README'], ['commit', '-q', '-m', 'first'], ['remote', 'add', 'origin', 'https://git.test/acme/app.git']]) services.git(args.workspace, ...a)
  services.bareRepository(svc, 'acme/app.git', args.workspace)
  const gitServer = await services.gitServer({ after: (f) => cleanups.push(f) }, svc, GIT_TOKEN)
  const gitOrigin = `http://127.0.0.1:${gitServer.port}`
  const reg = await services.verdaccio({ after: (f) => cleanups.push(f) }, svc)
  services.publishPrivate(reg, svc)
  services.personNpmrc(path.join(svc, 'person.npmrc'), reg)
  Object.assign(env, { PO_SANDBOX_GIT_HOSTS: `git.test=${gitOrigin}`, GIT_CONFIG_GLOBAL: services.credentialStore(svc, gitOrigin, GIT_TOKEN), npm_config_userconfig: path.join(svc, 'person.npmrc') })
  for (const k of ['GH_TOKEN', 'GITHUB_TOKEN', 'NPM_TOKEN', 'NPM_CONFIG_USERCONFIG', 'PIP_INDEX_URL']) delete env[k]
  const cli = path.join(root, 'bin', 'po-sandbox.js')
  const po = (command, ...a) => run(process.execPath, [cli, command, '--po-home', poHome, ...a], { env })
  const image = ['--base-image', PODMAN_BASE, '--image-variant', 'minimal']
  const facts = { poHome, svc }
  const up = await po('up', args.workspace, ...image, '--json')
  facts.up = { code: up.code, stderr: up.stderr.slice(-3000) }
  // A failed step is a fact (its stack), so the services and the sandbox below still go.
  if (up.code === 0) await (async () => {
    const c = JSON.parse(up.stdout).container
    facts.containerId = c.containerId
    const info = JSON.parse(podman('inspect', c.containerId))[0]
    facts.networkMode = info.HostConfig.NetworkMode
    // The network namespace is its holder's, which is in slirp4netns (with its rules).
    const holder = JSON.parse(podman('inspect', info.HostConfig.NetworkMode.replace(/^container:/, '')))[0]
    facts.holderNetworkMode = holder.HostConfig.NetworkMode
    facts.holderLabels = holder.Config.Labels
    facts.env = info.Config.Env.filter((kv) => kv.startsWith('PO_BROKER_'))
    facts.keyInEnv = info.Config.Env.some((kv) => kv.includes(REAL))
    facts.hosts = podman('exec', c.containerId, 'cat', '/etc/hosts')
    // The hub's way to the server: the published loopback port, which rootlessport forwards
    // from inside the namespace, over its loopback (slirp4netns: no gateway the rules know).
    facts.health = await fetch(`${c.url}/api/health`, { signal: AbortSignal.timeout(20000) }).then((r) => r.json()).catch((e) => ({ error: String(e.cause ?? e) }))
    const pi = await po('exec', args.workspace, '--', 'pi', '-p', '--no-session', '--provider', 'anthropic', '--model', 'claude-haiku-4-5', 'ping')
    facts.pi = { code: pi.code, stdout: pi.stdout, stderr: pi.stderr.slice(-3000) }
    facts.requests = upstream.requests.map((q) => ({ api: q.api ?? null, path: q.path, key: q.headers['x-api-key'] ?? null, stream: q.body?.stream ?? null, sawToken: JSON.stringify(q).includes('sk-ant-api03-') && !JSON.stringify(q).includes(REAL) }))
    facts.sameContainer = podman('ps', '-q', '--no-trunc', '--filter', `id=${c.containerId}`).trim() === c.containerId
    // Each through another hub's exec than the one that made the container (its ports are that hub's).
    const who = 'git -c user.name=Agent -c user.email=agent@test'
    const pushed = await po('exec', args.workspace, '--', 'sh', '-c', `cd /tmp && git clone -q https://git.test/acme/app.git far 2>&1 && cd far && echo t > t && git add t && ${who} commit -q -m over-tcp && git push origin HEAD:refs/heads/agent/tcp 2>&1`)
    facts.git = { code: pushed.code, out: pushed.stdout + pushed.stderr, server: gitServer.requests, log: (() => { try { return services.git(path.join(svc, 'acme/app.git'), 'log', '-1', '--format=%s', 'agent/tcp') } catch (e) { return String(e) } })() }
    const asked = await po('exec', args.workspace, '--', 'node', '-e', services.REGISTRY_PROBE)
    facts.registry = { code: asked.code, out: asked.stdout.trim(), err: asked.stderr.slice(-2000) }
    const grep = await po('exec', args.workspace, '--', 'sh', '-c', `grep -rl -e '${GIT_TOKEN}' -e '${reg.token}' /proc/[0-9]*/environ /tmp "$HOME" . 2>/dev/null; echo done`)
    facts.secretsInside = grep.stdout.trim()
  })().catch((e) => { facts.error = e.stack })
  for (const f of cleanups) await f()
  const down = await po('down', args.workspace, '--json')
  facts.down = { code: down.code, stderr: down.stderr.slice(-2000) }
  // This run's own (the CLI's owner is its Po home's): another run's leftovers are not its.
  const owner = readFileSync(path.join(poHome, 'sandbox-owner'), 'utf8').trim()
  facts.left = podman('ps', '-a', '-q', '--filter', `label=po.owner=${owner}`).trim()
  for (const v of podman('volume', 'ls', '-q', '--filter', `label=po.owner=${owner}`).split('\n').filter(Boolean)) podman('volume', 'rm', v)
  await upstream.close()
  out(facts)
} else if (args.scenario === 'podman-clone') {
  // Clone mode on rootless Podman: `po-sandbox up --clone` of a small repository, what the copy
  // shows inside, the acceptance of planting, diff and apply (asserted here, by the shared
  // fixture), the copy volume as this user sees it on the host, adoption, down, --discard.
  const { root, run } = await import('./helpers.mjs')
  const { LOOK_COPY, cliSandbox, parseLines, plantAndApply, smallRepository, treeHash } = await import('./clone-fixtures.mjs')
  const poHome = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'po-nonroot-home-')))
  const env = podmanEnv({})
  for (const k of ['PO_SANDBOX', 'PO_SANDBOX_WORKSPACE_MODE']) delete env[k]
  const cli = path.join(root, 'bin', 'po-sandbox.js')
  const po = (command, ...a) => run(process.execPath, [cli, command, '--po-home', poHome, ...a], { env })
  const image = ['--base-image', PODMAN_BASE, '--image-variant', 'minimal']
  const ws = addon.workspaceForFolder(args.workspace).id
  const copies = () => JSON.parse(podman('volume', 'ls', '--format', 'json', '--filter', `label=po.workspace=${ws}`)).filter((v) => v.Labels['po.workspace-copy'] === '1').map((v) => v.Name)
  const facts = { poHome, commit: await smallRepository(args.workspace) }
  const before = treeHash(args.workspace)
  const up = await po('up', args.workspace, '--clone', '--json', ...image)
  facts.up = { code: up.code, stderr: (up.stderr + up.stdout).slice(-3000) }
  if (up.code === 0) {
    facts.user = JSON.parse(podman('inspect', JSON.parse(up.stdout).container.containerId))[0].Config.User
    const look = await po('exec', args.workspace, '--', 'sh', '-c', LOOK_COPY)
    facts.look = { code: look.code, stderr: look.stderr.slice(-2000), ...parseLines(look.stdout) }
    // A failed assertion is a fact (its stack), so the sandbox below is still removed.
    facts.took = await plantAndApply(cliSandbox(po, args.workspace), args.workspace, before, 'po-sandbox/agent-work').catch((e) => ({ error: e.stack }))
    facts.copies = copies()
    // The copy on the host, as this user: its files are this user's and readable.
    const mountpoint = JSON.parse(podman('volume', 'inspect', facts.copies[0]))[0].Mountpoint
    const at = (f) => { const st = lstatSync(path.join(mountpoint, f)); return `${st.uid}:${st.gid}` }
    facts.hostOwners = [...new Set(['.', 'tracked.txt', 'Makefile', '.git', '.git/HEAD', '.git/objects'].map(at))]
    facts.hostRead = readFileSync(path.join(mountpoint, 'untracked.txt'), 'utf8')
    const adopted = await po('up', args.workspace, '--clone', '--json', ...image)
    facts.adopted = adopted.code === 0 ? JSON.parse(adopted.stdout).container.adopted : adopted.stderr.slice(-2000)
    facts.keptHead = (await po('exec', args.workspace, '--', 'git', 'rev-parse', 'HEAD')).stdout.trim()
    const down = await po('down', args.workspace)
    facts.down = { code: down.code, stderr: down.stderr.slice(-2000) }
    facts.keptCopies = copies()
  }
  const discard = await po('down', args.workspace, '--discard')
  facts.discard = { code: discard.code, stderr: discard.stderr.slice(-2000) }
  facts.leftCopies = copies()
  for (const v of podman('volume', 'ls', '-q', '--filter', `label=po.workspace=${ws}`).split('\n').filter(Boolean)) podman('volume', 'rm', v)
  out(facts)
} else {
  throw new Error(`unknown scenario ${args.scenario}`)
}
process.exit(0)
