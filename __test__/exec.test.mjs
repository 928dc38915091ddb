// `po-sandbox exec` through the container's spawner (src/sandbox/on_engine/exec/spawner.rs), against the
// real Docker engine and the local test base image: the first exec takes the engine's exec and
// starts a spawner; later ones run as its children, exactly as the engine's exec would run them
// (environment, user, folder, confinement), with stdin, stdout and stderr apart and in volume,
// exit codes and signals; an agent inside that kills the spawner and squats its socket, or puts
// a link to a host socket in its place, gets nothing and the engine's exec is taken; the
// command ends with the CLI; `down` leaves no record and no socket.
import { test, before } from 'node:test'
import { spawn } from 'node:child_process'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { addon, dockerCli, homeOwner, requireDocker, root, run, socketServer, tempDir, waitFor } from './helpers.mjs'

const cli = path.join(root, 'bin', 'po-sandbox.js')
const IMAGE = ['--base-image', 'po-sandbox-test-base:node24-nft', '--image-variant', 'minimal']

before(async () => {
  await requireDocker()
  const r = await run('bash', [path.join(root, 'scripts/build-test-base-image.sh')])
  assert.equal(r.code, 0, `build-test-base-image.sh failed:\n${r.stderr}`)
})

function po(args, input) {
  const env = { ...process.env }
  for (const k of ['PO_SANDBOX', 'PO_SANDBOX_LOG']) delete env[k]
  return run(process.execPath, [cli, ...args], { env, input })
}

/** Resolves when `child`'s stdout has said `word`; fails after 30 s with what it wrote. */
function said(child, word) {
  let out = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gave up waiting for ${word}: ${out}`)), 30000)
    child.stdout.on('data', (d) => {
      out += d
      if (out.includes(word)) { clearTimeout(timer); resolve() }
    })
  })
}

/** The parent of the command inside: `0` for the engine's exec, else the spawner's argv. */
const PARENT = ['sh', '-c', 'if [ "$PPID" = 0 ]; then echo engine; else tr "\\0" " " </proc/$PPID/cmdline; fi']

test('exec through the spawner: as the engine would run it, streams apart and in volume, exit codes; a killed or squatted spawner is passed over; the command ends with the CLI; down leaves nothing', async (t) => {
  const dir = tempDir(t, 'po-exec-')
  const folder = path.join(dir, 'project')
  mkdirSync(folder)
  const poHome = path.join(dir, 'po-home')
  const owner = homeOwner(poHome)
  const ws = addon.workspaceForFolder(folder)
  t.after(() => addon.stopSandboxContainers({ poHome, owner, workspace: ws.id, removeVolumes: true }))
  const home = ['--po-home', poHome]
  const exec = (command, input) => po(['exec', folder, ...home, '--', ...command], input)

  const up = await po(['up', folder, ...home, ...IMAGE, '--json'])
  assert.equal(up.code, 0, up.stderr)
  const c = JSON.parse(up.stdout).container
  const tokens = path.join(poHome, 'sandbox-tokens', readdirSync(path.join(poHome, 'sandbox-tokens'))[0])
  const recordPath = path.join(tokens, `${ws.id}.exec`)
  const brokerDir = JSON.parse(dockerCli(['inspect', c.containerId]))[0].Mounts.find((m) => m.Destination === '/run/po-broker').Source
  const record = () => existsSync(recordPath) && JSON.parse(readFileSync(recordPath, 'utf8'))
  const listening = (r) => r && existsSync(path.join(brokerDir, r.socket)) && lstatSync(path.join(brokerDir, r.socket)).isSocket()

  // The first exec: the engine's; it starts a spawner, which the engine lists with the pid the
  // host recorded, and which listens in the broker's folder once the rules' gate let it start.
  const first = await exec(PARENT)
  assert.equal(first.code, 0, first.stderr)
  assert.equal(first.stdout.trim(), 'engine')
  const rec = await waitFor(() => listening(record()) && record(), 'the spawner listening', 30000)
  assert.equal(rec.container_id, c.containerId)
  const top = dockerCli(['top', c.containerId, '-eo', 'pid,args'])
  assert.match(top, new RegExp(`^\\s*${rec.pid}\\s.*po-sandbox-exec /run/po-broker/${rec.socket}`, 'm'))
  assert.equal(lstatSync(recordPath).mode & 0o777, 0o600)

  // Later ones: children of the spawner.
  const second = await exec(PARENT)
  assert.equal(second.code, 0, second.stderr)
  assert.match(second.stdout, /po-sandbox-exec/)

  // As the engine's exec runs a command: the same environment, user, umask, limits, folder and
  // confinement.
  const probe = ['sh', '-c', 'pwd; id; umask; ulimit -n; grep -E "^(Cap|NoNewPrivs|Seccomp)" /proc/self/status; cat /proc/self/cgroup; env | sort']
  const fast = await exec(probe)
  const engine = dockerCli(['exec', '-w', ws.path, c.containerId, ...probe])
  assert.equal(fast.code, 0, fast.stderr)
  assert.equal(fast.stdout.trim(), engine.trim())
  assert.doesNotMatch(fast.stdout, /PO_SANDBOX_SPAWNER/)

  // stdin in, stdout and stderr apart, the exit code out.
  const piped = await exec(['sh', '-c', 'cat; echo to-stderr >&2; exit 7'], 'from-stdin\n')
  assert.deepEqual([piped.code, piped.stdout, piped.stderr], [7, 'from-stdin\n', 'to-stderr\n'])
  // In volume, both ways at once: 6 MiB in, out on stdout and on stderr, byte for byte.
  const big = randomBytes(4.5 * 1024 * 1024).toString('base64')
  const tee = await exec(['tee', '/dev/stderr'], big)
  assert.equal(tee.code, 0)
  assert.ok(tee.stdout === big && tee.stderr === big, `stdout ${tee.stdout.length}, stderr ${tee.stderr.length} of ${big.length}`)
  // Exit codes as the engine gives them: a signal's, and a program that is not there.
  assert.equal((await exec(['sh', '-c', 'kill -TERM $$'])).code, 143)
  const missing = await exec(['no-such-program-x'])
  assert.equal(missing.code, 126)
  assert.match(missing.stderr, /no-such-program-x/)
  // Still the very same spawner.
  assert.equal(record().pid, rec.pid)
  // Its pipes are nowhere in the file system: a recursive read of /tmp finishes.
  assert.equal(dockerCli(['exec', c.containerId, 'find', '/tmp', '/run/po-broker', '-type', 'p']), '')

  // The command ends with the CLI: killed, its command gets SIGHUP.
  const hup = path.join(folder, 'hup')
  const waits = spawn(process.execPath, [cli, 'exec', folder, ...home, '--', 'node', '-e', `process.on('SIGHUP',()=>{require('fs').writeFileSync(${JSON.stringify(hup)},'hup');process.exit(0)});console.log('ready');setInterval(()=>{},1000)`], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.after(() => waits.kill('SIGKILL'))
  await said(waits, 'ready')
  waits.kill('SIGKILL')
  await waitFor(() => existsSync(hup), 'the command ending with SIGHUP')

  // The spawner going away mid-command: the CLI says so (125), nothing hangs.
  const inside = (script) => dockerCli(['exec', c.containerId, 'sh', '-c', script])
  const killSpawner = `for p in /proc/[0-9]*; do grep -qs "po-sandbox-[e]xec" $p/cmdline && kill -9 \${p#/proc/}; done; true`
  const cut = spawn(process.execPath, [cli, 'exec', folder, ...home, '--', 'sh', '-c', 'echo started; sleep 30'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let cutErr = ''
  cut.stderr.on('data', (d) => { cutErr += d })
  await said(cut, 'started')
  inside(killSpawner)
  const cutCode = await new Promise((resolve) => cut.once('close', resolve))
  assert.equal(cutCode, 125)
  assert.match(cutErr, /spawner went away/)

  // An agent that squats the socket of the spawner it killed: the listener is not the recorded
  // process, so the host sends it nothing and takes the engine's exec (which starts another).
  const squatted = path.join(folder, 'squatted')
  const squat = `const fs=require('fs'),p=process.argv[1];try{fs.unlinkSync(p)}catch{};require('net').createServer((s)=>s.on('data',(d)=>fs.appendFileSync(${JSON.stringify(squatted)},d))).listen(p,()=>fs.writeFileSync(${JSON.stringify(squatted)},''))`
  dockerCli(['exec', '-d', c.containerId, 'node', '-e', squat, `/run/po-broker/${rec.socket}`])
  await waitFor(() => existsSync(squatted), 'the squatter listening')
  const passedOver = await exec(PARENT)
  assert.equal(passedOver.stdout.trim(), 'engine')
  assert.equal(readFileSync(squatted, 'utf8'), '', 'the squatter was sent something')
  const rec2 = await waitFor(() => record()?.pid !== rec.pid && listening(record()) && record(), 'a new spawner', 30000)

  // In its place, a link to a socket of the host's (the host would resolve it on its side):
  // never connected to.
  let connected = 0
  const hostSocket = path.join(dir, 'host.sock')
  await socketServer(t, hostSocket, () => { connected++ })
  inside(killSpawner)
  unlinkSync(path.join(brokerDir, rec2.socket))
  symlinkSync(hostSocket, path.join(brokerDir, rec2.socket))
  const linked = await exec(PARENT)
  assert.equal(linked.stdout.trim(), 'engine')
  assert.equal(connected, 0)
  const rec3 = await waitFor(() => record()?.pid !== rec2.pid && listening(record()) && record(), 'a third spawner', 30000)
  assert.match((await exec(PARENT)).stdout, /po-sandbox-exec/)

  // A spawner that cannot run in the container says so in `<socket>.failed` and exits (as one
  // does where the base has no mkfifo): found once, every later exec takes the engine's exec
  // and starts none, and the posture and the doctor say why.
  writeFileSync(path.join(brokerDir, `${rec3.socket}.failed`), 'mkfifo: not found (test)')
  inside(killSpawner)
  assert.equal((await exec(PARENT)).stdout.trim(), 'engine')
  assert.match(record().failed, /cannot run in this container \(mkfifo: not found \(test\)\)/)
  assert.equal((await exec(PARENT)).stdout.trim(), 'engine', 'no new spawner')
  assert.equal(record().pid, rec3.pid)
  const again = await po(['up', folder, ...home, ...IMAGE, '--json'])
  assert.match(JSON.parse(again.stdout).container.posture.execSpawner, /mkfifo: not found/)
  assert.match((await po(['up', folder, ...home, ...IMAGE])).stdout, /Exec {8}the engine's exec each time/)
  const doctor = JSON.parse((await po(['doctor', ...home, ...IMAGE, '--json'])).stdout)
  assert.ok(doctor.warnings.some((w) => w.startsWith(`workspace ${ws.id}: `) && /mkfifo: not found/.test(w)), doctor.warnings.join('\n'))

  // down: the container, its record and the spawner's socket go.
  const down = await po(['down', folder, ...home])
  assert.equal(down.code, 0, down.stderr)
  assert.equal(existsSync(recordPath), false)
  assert.equal(existsSync(path.join(brokerDir, rec3.socket)), false)
})
