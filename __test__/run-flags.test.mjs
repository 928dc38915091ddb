// Run flags (`runFlags`, `PO_SANDBOX_RUN_FLAGS`) against the real Docker engine, with the seed's
// own example: gVisor. The set-up registers Debian's `runsc` in dockerd's runtimes
// (scripts/gvisor-runtime.sh, a SIGHUP reload, never a restart) and restores daemon.json after
// the file, checking it is byte for byte what it was.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'

import { addon, dockerCli, root, run } from './helpers.mjs'
import {
  baseOptions, cleanupOwner, containersWith, fakeHost, getJson, hostEnv, inspect, newOwner, openLayer, tempHome,
  tempWorkspace, useTestBaseImage, volumesOf, writeBundle,
} from './provider-fixtures.mjs'

const { registerSandboxLayer, doctor, listSandboxContainers } = addon
const DAEMON_JSON = '/etc/docker/daemon.json'
const GVISOR = path.join(root, 'scripts/gvisor-runtime.sh')
/** What gVisor's kernel says it is; the host's /proc/version differs. */
const GVISOR_VERSION = 'Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016'

useTestBaseImage()

let original
before(async () => {
  original = existsSync(DAEMON_JSON) ? readFileSync(DAEMON_JSON, 'utf8') : null
  const r = await run('bash', [GVISOR, 'register'])
  assert.equal(r.code, 0, `gvisor-runtime.sh register failed:\n${r.stdout}\n${r.stderr}`)
  const runtimes = JSON.parse(dockerCli(['info', '--format', '{{json .Runtimes}}']))
  assert.ok(runtimes.runsc, `dockerd lists no runsc: ${JSON.stringify(runtimes)}`)
})
after(async () => {
  const r = await run('bash', [GVISOR, 'restore'])
  assert.equal(r.code, 0, `gvisor-runtime.sh restore failed:\n${r.stdout}\n${r.stderr}`)
  const now = existsSync(DAEMON_JSON) ? readFileSync(DAEMON_JSON, 'utf8') : null
  assert.equal(now, original, 'daemon.json is back as it was')
  if (original === null || !original.includes('runsc')) {
    assert.equal(JSON.parse(dockerCli(['info', '--format', '{{json .Runtimes}}'])).runsc, undefined, 'dockerd no longer lists runsc')
  }
})

function setup(t, runFlags) {
  const poHome = tempHome(t)
  const owner = newOwner()
  cleanupOwner(t, owner)
  writeBundle(poHome)
  return { poHome, owner, options: baseOptions(poHome, owner, runFlags === undefined ? {} : { runFlags }) }
}

function runFlagsInvalid(flag, why) {
  return (err) => {
    assert.ok(err instanceof Error, `not an Error: ${err}`)
    assert.equal(err.code, 'RUN_FLAGS_INVALID', err.message)
    assert.ok(err.message.includes(`'${flag}'`), `${err.message} names no ${flag}`)
    assert.match(err.message, why)
    return true
  }
}

// One item per refused class, with the words its message must carry.
const REFUSED = [
  ['--privileged', /every capability/],
  ['--privileged=false', /=false too/],
  ['--Privileged', /every capability/],
  ['--cap-add=SYS_ADMIN', /add capabilities/],
  ['--device=/dev/kvm', /host devices/],
  ['--pid=host', /namespace/],
  ['--ipc=host', /namespace/],
  ['--uts=host', /namespace/],
  ['--userns=host', /namespace/],
  ['--cgroupns=host', /namespace/],
  ['--network=host', /owns the network/],
  ['--net=host', /owns the network/],
  ['--user=0:0', /`user` option/],
  ['-u0', /`user` option/],
  ['-v/:/host', /owns every mount/],
  ['--mount=type=bind,src=/,dst=/h', /owns every mount/],
  ['--volumes-from=x', /owns every mount/],
  ['--security-opt=seccomp=unconfined', /system-call filter/],
  ['--security-opt=apparmor=unconfined', /AppArmor/],
  ['--security-opt=label=disable', /SELinux/],
  ['--security-opt=no-new-privileges=false', /new privileges/],
  ['-ePO_SANDBOX=0', /owns the environment/],
  ['--env=PO_X=1', /owns the environment/],
  ['-p8080:80', /exactly one/],
  ['--publish=0.0.0.0:80:80', /exactly one/],
  ['--sysctl=kernel.x=1', /not a flag the layer maps/],
  ['--pids-limit=100000', /above the layer's pid limit/],
  ['--label=po.owner=someone', /po\.\* namespace/],
  ['--tmpfs=/po-home', /at \/po-home/],
  ['\u2014privileged', /U\+2014/],
  ['runsc', /bare word/],
]

test('every refused class is RUN_FLAGS_INVALID, thrown before anything is registered or made (option and variable alike)', async (t) => {
  const { poHome, owner, options } = setup(t)
  const wsPath = tempWorkspace(t)
  for (const [flag, why] of REFUSED) {
    const host = fakeHost()
    const opts = { ...options, workspaces: [{ id: 'ws', path: wsPath }], runFlags: ['--memory=1g', flag] }
    assert.throws(() => registerSandboxLayer(host, opts), runFlagsInvalid(flag, why), flag)
    assert.deepEqual(host.calls, [], `nothing registered for ${flag}`)
  }
  // A separated value: the flag names what to write instead.
  assert.throws(() => registerSandboxLayer(fakeHost(), { ...options, runFlags: ['--runtime', 'runsc'] }), runFlagsInvalid('--runtime', /--runtime=<value>/))
  // The variable, whitespace-separated, when the option is not given.
  const env = hostEnv({ PO_SANDBOX_RUN_FLAGS: '--runtime=runsc --cap-add=NET_ADMIN' })
  assert.throws(() => registerSandboxLayer(fakeHost(), { ...options, env }), runFlagsInvalid('--cap-add=NET_ADMIN', /add capabilities/))
  await assert.rejects(async () => doctor(process.version, { poHome, env }), runFlagsInvalid('--cap-add=NET_ADMIN', /add capabilities/))
  await assert.rejects(async () => doctor(process.version, { poHome, runFlags: ['--net=host'] }), runFlagsInvalid('--net=host', /network/))
  // A tmpfs over this workspace passes registration (it depends on the workspace) and is refused
  // by the start, before its sandbox folder, token file, volumes or container are made.
  const { layer } = openLayer({ ...options, runFlags: [`--tmpfs=${path.dirname(wsPath)}`] })
  assert.equal((await layer.provider.ready()).state, 'ready')
  await assert.rejects(layer.containers.start({ id: 'over', path: wsPath }), runFlagsInvalid(`--tmpfs=${path.dirname(wsPath)}`, /over the container's mount/))
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])
  assert.deepEqual(volumesOf(owner), [])
  // The start-up kept the engine's facts for the next one (docs/files.md).
  assert.deepEqual(readdirSync(poHome).sort(), ['container-runtime', 'engine-facts.json'], 'no sandbox folder or token file')
})

const GVISOR_FLAGS = [
  '--runtime=runsc',
  '--memory=512m',
  '--cpus=1.5',
  '--cpu-shares=512',
  '--pids-limit=512',
  '--shm-size=32m',
  '--ulimit=nofile=1024:2048',
  '--tmpfs=/scratch:size=16m,mode=1777',
  '--dns-option=ndots:1',
  '--label=team=qa',
  '--security-opt=no-new-privileges',
]

test('under gVisor: the container really runs on runsc with every accepted flag in inspect, answers its health path, is adopted unchanged and replaced when a flag changes', async (t) => {
  const { poHome, owner, options } = setup(t, GVISOR_FLAGS)
  const wsPath = tempWorkspace(t)
  const first = openLayer(options)
  const c = await first.layer.containers.start({ id: 'gv', path: wsPath })
  assert.equal(c.adopted, false)
  assert.deepEqual(await getJson(c.url, '/api/health'), { ok: true, path: '/api/health' })

  // Really gVisor: its kernel's /proc/version and boot log, not the host's.
  assert.equal(dockerCli(['exec', c.containerId, 'cat', '/proc/version']), GVISOR_VERSION)
  assert.notEqual(readFileSync('/proc/version', 'utf8').trim(), GVISOR_VERSION)
  assert.match(dockerCli(['exec', c.containerId, 'dmesg']), /Starting gVisor/)

  const info = inspect(c.containerId)
  const hc = info.HostConfig
  assert.equal(hc.Runtime, 'runsc')
  assert.equal(hc.Memory, 512 * 1024 * 1024)
  assert.equal(hc.NanoCpus, 1.5e9)
  assert.equal(hc.CpuShares, 512)
  assert.equal(hc.PidsLimit, 512)
  assert.equal(hc.ShmSize, 32 * 1024 * 1024)
  assert.deepEqual(hc.Ulimits, [{ Name: 'nofile', Soft: 1024, Hard: 2048 }])
  // The run flag's tmpfs joins the writable places of the read-only root.
  assert.deepEqual(hc.Tmpfs, {
    '/scratch': 'size=16m,mode=1777',
    '/tmp': 'rw,exec,nosuid,nodev,mode=1777',
    '/var/tmp': 'rw,exec,nosuid,nodev,mode=1777',
    '/run': 'rw,noexec,nosuid,nodev,mode=1777',
  })
  assert.equal(hc.ReadonlyRootfs, true)
  // DNS flags go to the network namespace holder, whose network the container shares.
  const holder = inspect(hc.NetworkMode.replace(/^container:/, ''))
  assert.deepEqual(holder.HostConfig.DnsOptions, ['ndots:1'])
  assert.equal(info.Config.Labels.team, 'qa')
  assert.equal(info.Config.Labels['po.run-flags'], GVISOR_FLAGS.join(' '))
  // The hardening is untouched.
  assert.deepEqual(hc.CapDrop, ['ALL'])
  assert.deepEqual(hc.SecurityOpt.map((o) => o.split('=')[0]), ['no-new-privileges', 'seccomp'])
  assert.equal(hc.Privileged, false)
  // The holder runs on the engine's default runtime and its rules hold for the gVisor
  // container too (runsc uses the namespace's own network stack here, --network=host): the
  // gateway is refused from inside, at once.
  assert.equal(holder.HostConfig.Runtime, 'runc')
  const gw = JSON.parse(dockerCli(['network', 'inspect', `po-net-${owner}`]))[0].IPAM.Config[0].Gateway
  // A listener of the test's own on every host address: without the rules it would answer.
  const listener = net.createServer((sock) => sock.on('error', () => {}).end())
  await new Promise((resolve) => listener.listen(0, '0.0.0.0', resolve))
  t.after(() => listener.close())
  const probe = `const s=require('net').connect(${listener.address().port},'${gw}');const t0=Date.now();s.on('error',(e)=>{console.log(e.code,Date.now()-t0);process.exit()});s.on('connect',()=>{console.log('connected');process.exit()})`
  const inside = dockerCli(['exec', '-w', '/', c.containerId, 'node', '-e', probe])
  assert.match(inside, /^ECONNREFUSED \d{1,3}$/, `the gateway from inside the gVisor container: ${inside}`)
  // Its holder is on the owner's network (created on its id), not the default bridge.
  assert.deepEqual(Object.keys(holder.NetworkSettings.Networks), [`po-net-${owner}`])
  assert.equal(holder.HostConfig.NetworkMode, JSON.parse(dockerCli(['network', 'inspect', `po-net-${owner}`]))[0].Id)
  assert.equal(dockerCli(['exec', c.containerId, 'sh', '-c', 'ulimit -n']), '1024')
  // The posture reports them; ls and the CLI show them.
  assert.equal(c.posture.runtime, 'runsc')
  assert.deepEqual(c.posture.runFlags, GVISOR_FLAGS)
  const rows = await listSandboxContainers({ poHome, owner })
  assert.deepEqual(rows.map((r) => r.runFlags), [GVISOR_FLAGS])
  const cli = await run(process.execPath, [path.join(root, 'bin/po-sandbox.js'), 'ls', '--po-home', poHome, '--owner', owner])
  assert.equal(cli.code, 0, cli.stderr)
  assert.match(cli.stdout, /RUN FLAGS/)
  assert.ok(cli.stdout.includes('--runtime=runsc --memory=512m'), cli.stdout)
  const report = await doctor(process.version, { poHome, runFlags: GVISOR_FLAGS })
  assert.deepEqual(report.runFlags, GVISOR_FLAGS)
  assert.ok(report.text.includes(`Run flags ${GVISOR_FLAGS.join(' ')}\n`), report.text)
  assert.deepEqual(report.warnings.filter((w) => w.includes('runtime')), [])
  const missing = await doctor(process.version, { poHome, runFlags: ['--runtime=po-no-such-runtime'] })
  assert.ok(missing.warnings.some((w) => w.includes('--runtime=po-no-such-runtime: the engine lists no such runtime')), missing.warnings.join('\n'))

  // The same flags from another hub: adopted, not replaced (their effects are no drift).
  const again = openLayer(options)
  const adopted = await again.layer.containers.start({ id: 'gv', path: wsPath })
  assert.equal(adopted.adopted, true, adopted.replacedReason ?? '')
  assert.equal(adopted.containerId, c.containerId)

  // One flag changed: the container is replaced, and the new one has the new value.
  const changed = GVISOR_FLAGS.map((f) => (f === '--memory=512m' ? '--memory=256m' : f))
  const third = openLayer({ ...options, runFlags: changed })
  const replaced = await third.layer.containers.start({ id: 'gv', path: wsPath })
  assert.equal(replaced.adopted, false)
  assert.notEqual(replaced.containerId, c.containerId)
  // A lower memory flag: the adoption check names the limit before the spec hash.
  assert.match(replaced.replacedReason ?? '', /memory limit is 536870912, not at most 268435456 bytes/)
  assert.equal(inspect(replaced.containerId).HostConfig.Memory, 256 * 1024 * 1024)
  assert.equal(inspect(replaced.containerId).HostConfig.Runtime, 'runsc')
  assert.notEqual((await run('docker', ['inspect', c.containerId])).code, 0, 'the old container is gone')
  assert.deepEqual(containersWith({ 'po.owner': owner }), [replaced.containerId])
  assert.deepEqual(await getJson(replaced.url, '/api/health'), { ok: true, path: '/api/health' })

  // The variable works as the option does (no option given): the same flags adopt it.
  const fromVar = openLayer({ ...options, runFlags: undefined, env: hostEnv({ PO_SANDBOX_RUN_FLAGS: changed.join(' ') }) })
  const viaVar = await fromVar.layer.containers.start({ id: 'gv', path: wsPath })
  assert.equal(viaVar.adopted, true, viaVar.replacedReason ?? '')
  assert.equal(viaVar.containerId, replaced.containerId)
})
