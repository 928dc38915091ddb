// Remote engines (issue 37): a second Docker engine of the test's own that is another machine's
// in all but its network (its own mount and UTS namespaces: its own host name, and no path of
// the hub's exists for it), reached over TLS on 127.0.0.1 (certificates of the test's own CA)
// and over SSH through a private sshd on a loopback port (its own host key, authorized key and
// known-hosts file; the person's ~/.ssh is never read). Nothing here leaves this machine.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, copyFileSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'

import { addon, run, tempDir, waitFor } from './helpers.mjs'
import { alive, freePort, privateEngine, testCa } from './private-engine.mjs'
import { baseOptions, newOwner, openLayer, removeOwner, tempHome, tempWorkspace, writeBundle } from './provider-fixtures.mjs'

const HOSTNAME = 'po-remote-box'

/** An sshd of the test's own on a loopback port: its own host key, the test's key authorized
 * for root, and a client config (`command`: ssh -F it) with its own known-hosts file. */
async function privateSshd(t, dir) {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const keygen = (file) => execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'po-sandbox test', '-f', path.join(dir, file)])
  keygen('host_key')
  keygen('id')
  keygen('other_host_key')
  copyFileSync(path.join(dir, 'id.pub'), path.join(dir, 'authorized_keys'))
  chmodSync(path.join(dir, 'authorized_keys'), 0o600)
  const port = await freePort()
  const config = path.join(dir, 'sshd_config')
  writeFileSync(config, [
    `Port ${port}`, 'ListenAddress 127.0.0.1', `HostKey ${dir}/host_key`, `PidFile ${dir}/sshd.pid`,
    `AuthorizedKeysFile ${dir}/authorized_keys`, 'PasswordAuthentication no', 'KbdInteractiveAuthentication no',
    'PermitRootLogin prohibit-password', 'StrictModes no', 'UsePAM no', 'LogLevel VERBOSE', '',
  ].join('\n'))
  // sshd's privilege separation folder (the package's service makes it).
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 })
  const log = path.join(dir, 'sshd.log')
  const out = openSync(log, 'a')
  const child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config], { stdio: ['ignore', out, out] })
  const hostKey = readFileSync(path.join(dir, 'host_key.pub'), 'utf8').trim().split(' ').slice(0, 2).join(' ')
  const otherKey = readFileSync(path.join(dir, 'other_host_key.pub'), 'utf8').trim().split(' ').slice(0, 2).join(' ')
  const clientConfig = (name, knownHosts) => {
    const file = path.join(dir, `${name}_config`)
    writeFileSync(path.join(dir, `${name}_known_hosts`), knownHosts)
    writeFileSync(file, [
      'Host *', `  IdentityFile ${dir}/id`, '  IdentitiesOnly yes', `  UserKnownHostsFile ${dir}/${name}_known_hosts`,
      '  GlobalKnownHostsFile /dev/null', '',
    ].join('\n'))
    return `ssh -F ${file}`
  }
  const sshd = {
    port,
    log: () => readFileSync(log, 'utf8'),
    logins: () => (readFileSync(log, 'utf8').match(/Accepted publickey for root/g) ?? []).length,
    command: clientConfig('good', `[127.0.0.1]:${port} ${hostKey}\n`),
    // Another key recorded for the host (as after a reinstall, or someone in the middle).
    wrongKey: clientConfig('wrong', `[localhost]:${port} ${otherKey}\n`),
    // The host not recorded at all.
    unknown: clientConfig('unknown', ''),
  }
  t.after(async () => {
    await run('ssh', [...sshd.command.split(' ').slice(1), '-p', String(port), '-O', 'exit', 'root@127.0.0.1']).catch(() => {})
    await run('pkill', ['-P', String(child.pid)])
    child.kill('SIGTERM')
    await waitFor(() => !alive(child.pid), 'the test sshd to exit', 10000)
  })
  await waitFor(() => new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true) }).once('error', () => resolve(false))
  }), `the test sshd to listen (log: ${log})`, 10000)
  return sshd
}

const check = (env, extra = {}) => addon.checkEngine({ engine: 'docker', timeoutMs: 15000, env: { HOME: process.env.HOME, PATH: process.env.PATH, ...env }, ...extra })

test('a remote engine over TLS and SSH: detected, named remote by its identity, refused with the fix when its keys or certificates are wrong', async (t) => {
  if (process.getuid() !== 0) throw new Error('This suite starts a Docker engine and an sshd of its own and needs root for them: run npm test as root.')
  const engine = await privateEngine(t, { hostname: HOSTNAME, tls: true, load: null })
  const dir = tempDir(t, 'po-remote-')
  const sshd = await privateSshd(t, path.join(dir, 'ssh'))
  const sshHost = `ssh://root@127.0.0.1:${sshd.port}${engine.sock}`
  const tlsEnv = { DOCKER_HOST: `tcp://127.0.0.1:${engine.tlsPort}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: engine.clientCerts }
  const sshEnv = { DOCKER_HOST: sshHost, PO_SANDBOX_SSH_COMMAND: sshd.command }

  await t.test('the engine is another machine for every path: a bind of a hub folder fails there', async () => {
    const folder = tempDir(t, 'po-remote-hub-folder-')
    const imported = await run('sh', ['-c', `tar cf - --files-from /dev/null | docker -H ${engine.host} import - po-remote-empty:1`])
    assert.equal(imported.code, 0, imported.stderr)
    const bind = await engine.docker('create', '--mount', `type=bind,src=${folder},dst=/x`, 'po-remote-empty:1', '/none')
    assert.notEqual(bind.code, 0, 'a bind of a hub folder was accepted by the engine in its own mount namespace')
    assert.match(bind.stderr, /bind source path does not exist/)
    assert.equal((await engine.docker('info', '--format', '{{.Name}}')).stdout.trim(), HOSTNAME)
  })

  await t.test('TLS: the engine answers, reached over TLS with the certificates of DOCKER_CERT_PATH, and is remote', async () => {
    const r = await check(tlsEnv)
    assert.equal(r.available, true, `${r.reasonCode}: ${r.reason}`)
    assert.equal(r.transport, 'tls')
    assert.equal(r.tlsCerts, engine.clientCerts)
    assert.equal(r.endpoint, `tcp://127.0.0.1:${engine.tlsPort}`)
    assert.equal(r.hostName, HOSTNAME)
    assert.equal(r.remote, true, 'an engine on a loopback port that names another machine is remote')
    // The person says otherwise: the option, then the variable.
    assert.equal((await check(tlsEnv, { engineRemote: false })).remote, false)
    assert.equal((await check({ ...tlsEnv, PO_SANDBOX_ENGINE_REMOTE: '0' })).remote, false)
    const bad = await check({ ...tlsEnv, PO_SANDBOX_ENGINE_REMOTE: 'maybe' }).catch((e) => e)
    assert.equal(bad.code, 'OPTIONS_INVALID')
    assert.match(bad.message, /PO_SANDBOX_ENGINE_REMOTE/)
  })

  await t.test('TLS: a Docker context with TLS material is reached the same way', async () => {
    const config = path.join(dir, 'docker-config')
    const name = 'po-remote'
    const sha = (s) => execFileSync('sh', ['-c', `printf %s '${s}' | sha256sum`], { encoding: 'utf8' }).split(' ')[0]
    const meta = path.join(config, 'contexts', 'meta', sha(name))
    const material = path.join(config, 'contexts', 'tls', sha(name), 'docker')
    mkdirSync(meta, { recursive: true })
    mkdirSync(material, { recursive: true })
    writeFileSync(path.join(meta, 'meta.json'), JSON.stringify({ Name: name, Metadata: {}, Endpoints: { docker: { Host: `tcp://127.0.0.1:${engine.tlsPort}`, SkipTLSVerify: false } } }))
    for (const f of ['ca.pem', 'cert.pem', 'key.pem']) copyFileSync(path.join(engine.clientCerts, f), path.join(material, f))
    const r = await check({ DOCKER_CONFIG: config, DOCKER_CONTEXT: name })
    assert.equal(r.available, true, `${r.reasonCode}: ${r.reason}`)
    assert.equal(r.transport, 'tls')
    assert.equal(r.context, name)
    assert.equal(r.tlsCerts, material)
  })

  await t.test('TLS: an engine certificate from another CA, a client certificate the engine does not trust, and TLS without verification are each refused with the fix', async () => {
    const other = testCa(path.join(dir, 'other-ca'), 'another CA')
    const otherClient = other.issue('client')
    const wrongCa = path.join(dir, 'wrong-ca')
    mkdirSync(wrongCa)
    copyFileSync(path.join(other.dir, 'ca.pem'), path.join(wrongCa, 'ca.pem'))
    copyFileSync(path.join(engine.clientCerts, 'cert.pem'), path.join(wrongCa, 'cert.pem'))
    copyFileSync(path.join(engine.clientCerts, 'key.pem'), path.join(wrongCa, 'key.pem'))
    let r = await check({ ...tlsEnv, DOCKER_CERT_PATH: wrongCa })
    assert.equal(r.available, false)
    assert.equal(r.reasonCode, 'ENGINE_TLS_UNTRUSTED')
    assert.match(r.reason, /does not trust/)
    assert.ok(r.reason.includes(path.join(wrongCa, 'ca.pem')), r.reason)
    const wrongClient = path.join(dir, 'wrong-client')
    mkdirSync(wrongClient)
    copyFileSync(path.join(engine.clientCerts, 'ca.pem'), path.join(wrongClient, 'ca.pem'))
    copyFileSync(otherClient.cert, path.join(wrongClient, 'cert.pem'))
    copyFileSync(otherClient.key, path.join(wrongClient, 'key.pem'))
    r = await check({ ...tlsEnv, DOCKER_CERT_PATH: wrongClient })
    assert.equal(r.available, false)
    assert.equal(r.reasonCode, 'ENGINE_TLS_UNTRUSTED')
    assert.match(r.reason, /refused this client's certificate/)
    r = await check({ ...tlsEnv, DOCKER_CERT_PATH: path.join(dir, 'nowhere') })
    assert.equal(r.reasonCode, 'ENGINE_TLS_FILES')
    assert.ok(r.reason.includes(path.join(dir, 'nowhere', 'ca.pem')), r.reason)
    r = await check({ DOCKER_HOST: tlsEnv.DOCKER_HOST, DOCKER_TLS: '1' })
    assert.equal(r.reasonCode, 'ENGINE_UNSUPPORTED_ENDPOINT')
    assert.match(r.reason, /DOCKER_TLS_VERIFY=1/)
  })

  await t.test('SSH: the engine answers through ssh … docker system dial-stdio, over one SSH connection', async () => {
    const before = sshd.logins()
    const r = await check(sshEnv)
    assert.equal(r.available, true, `${r.reasonCode}: ${r.reason}`)
    assert.equal(r.transport, 'ssh')
    assert.equal(r.endpoint, sshHost)
    assert.equal(r.hostName, HOSTNAME)
    assert.equal(r.remote, true)
    for (let i = 0; i < 4; i++) assert.equal((await check(sshEnv)).available, true)
    const doctor = await addon.doctor(process.version, { engine: 'docker', env: { HOME: process.env.HOME, PATH: process.env.PATH, ...sshEnv } })
    assert.match(doctor.text, /over SSH \(ssh … docker system dial-stdio\), machine po-remote-box \(another machine\), \d+ ms a round trip/)
    assert.ok(doctor.roundTripMs >= 1, String(doctor.roundTripMs))
    assert.match(doctor.text, /not usable here \(remote\)/)
    assert.equal(sshd.logins() - before, 1, `six checks and a doctor logged in more than once:\n${sshd.log()}`)
  })

  await t.test('SSH: a host key that is not the known one, and a host not known at all, are refused with the fix and never accepted', async () => {
    const wrong = await check({ DOCKER_HOST: `ssh://root@localhost:${sshd.port}${engine.sock}`, PO_SANDBOX_SSH_COMMAND: sshd.wrongKey })
    assert.equal(wrong.available, false)
    assert.equal(wrong.reasonCode, 'ENGINE_SSH_HOST_KEY', wrong.reason)
    assert.match(wrong.reason, /not the key your known hosts hold/)
    assert.match(wrong.reason, /ssh-keygen -R localhost/)
    const unknownFile = path.join(dir, 'ssh', 'unknown_known_hosts')
    const unknown = await check({ DOCKER_HOST: `ssh://root@[::1]:${sshd.port}`, PO_SANDBOX_SSH_COMMAND: sshd.unknown })
    assert.equal(unknown.available, false)
    // sshd listens on 127.0.0.1 only: ::1 is refused before any key is seen.
    assert.equal(unknown.reasonCode, 'ENGINE_SSH_FAILED', unknown.reason)
    const unknownV4 = await check({ DOCKER_HOST: `ssh://root@localhost:${sshd.port}${engine.sock}`, PO_SANDBOX_SSH_COMMAND: sshd.unknown })
    assert.equal(unknownV4.reasonCode, 'ENGINE_SSH_HOST_KEY', unknownV4.reason)
    assert.match(unknownV4.reason, /not in your known hosts/)
    assert.equal(readFileSync(unknownFile, 'utf8'), '', 'the host key was recorded without the person')
  })

  await t.test('the container provider refuses the remote engine with the reason, making nothing there or here', async () => {
    const poHome = tempHome(t)
    const owner = newOwner()
    t.after(() => removeOwner(owner))
    writeBundle(poHome)
    const ws = tempWorkspace(t)
    const env = { ...process.env, ...sshEnv }
    const { layer } = openLayer(baseOptions(poHome, owner, { engine: 'docker', env, workspaces: [{ id: 'far', path: ws }] }))
    t.after(() => layer.containers.stopAll().catch(() => {}))
    const status = await layer.provider.ready()
    assert.equal(status.code, 'ENGINE_UNAVAILABLE', JSON.stringify(status))
    assert.equal(status.state, 'unavailable')
    assert.match(status.reason, /runs on another machine \(po-remote-box\)/)
    assert.match(status.reason, /PO_SANDBOX_ENGINE_REMOTE=0/)
    assert.equal(status.workspaces[0].errorCode, 'ENGINE_UNAVAILABLE')
    for (const kind of [['ps', '-aq'], ['volume', 'ls', '-q'], ['network', 'ls', '-q', '--filter', 'label=po.owner']]) {
      assert.equal((await engine.docker(...kind)).stdout.trim(), '', `${kind.join(' ')} on the remote engine`)
    }
  })
})
