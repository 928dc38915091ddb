// Engine detection through the built addon, against the real Docker engine and against each
// way an engine can be missing or broken.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'

import { addon, dockerCli, isolatedEnv, requireDocker, socketServer, staleSocket, tempDir } from './helpers.mjs'

const { checkEngine, engineCandidates, listSandboxContainers } = addon

test('the real Docker engine is found, with versions that match what the engine says', async () => {
  const r = await requireDocker()
  assert.equal(r.available, true)
  assert.equal(r.engine, 'docker')
  assert.equal(r.endpoint, 'unix:///var/run/docker.sock')
  assert.equal(r.source, 'rootful')
  assert.equal(r.engineVersion, dockerCli(['version', '--format', '{{.Server.Version}}']))
  const [major, minor] = r.apiVersion.split('.').map(Number)
  assert.ok(major === 1 && minor >= 41, `API ${r.apiVersion}`)
  assert.equal(r.osType, 'linux')
  assert.equal(r.os, dockerCli(['info', '--format', '{{.OperatingSystem}}']))
  assert.equal(r.vm, false)
  assert.equal(r.rootless, false)
  assert.equal(r.reason, undefined)
  assert.equal(r.candidates[0].outcome, 'available')
})

test('DOCKER_HOST is honoured', async (t) => {
  await requireDocker()
  const dir = tempDir(t)
  const r = await checkEngine({ env: isolatedEnv(dir, { DOCKER_HOST: 'unix:///var/run/docker.sock' }) })
  assert.equal(r.available, true)
  assert.equal(r.source, 'DOCKER_HOST')
  // DOCKER_HOST replaces Docker's usual places: only one docker candidate was tried.
  assert.deepEqual(r.candidates.map((c) => c.engine), ['docker'])
})

test('no socket anywhere: not installed, naming where it looked and what to do', async (t) => {
  const dir = tempDir(t)
  const r = await checkEngine({ env: isolatedEnv(dir, { DOCKER_HOST: `unix://${dir}/docker.sock`, CONTAINER_HOST: `unix://${dir}/podman.sock` }) })
  assert.equal(r.available, false)
  assert.equal(r.reasonCode, 'ENGINE_NOT_INSTALLED')
  assert.match(r.reason, new RegExp(`${dir}/docker.sock`))
  assert.match(r.reason, /Install Docker/)
  assert.ok(r.candidates.every((c) => c.outcome === 'not-found'), JSON.stringify(r.candidates))
  assert.deepEqual([...new Set(r.candidates.map((c) => c.engine))], ['docker', 'podman', 'nerdctl', 'finch'])
})

test('a regular file where the socket should be', async (t) => {
  const dir = tempDir(t)
  writeFileSync(path.join(dir, 'docker.sock'), '')
  const r = await checkEngine({ env: isolatedEnv(dir, { DOCKER_HOST: `unix://${dir}/docker.sock`, PO_SANDBOX_ENGINE: 'docker' }) })
  assert.equal(r.reasonCode, 'ENGINE_NOT_A_SOCKET')
  assert.match(r.reason, /is a regular file, not the engine's socket/)
  assert.equal(r.candidates[0].outcome, 'not-a-socket')
})

test('a socket with nothing behind it: the engine is stopped', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'docker.sock')
  await staleSocket(sock)
  const r = await checkEngine({ env: isolatedEnv(dir, { DOCKER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'docker' }) })
  assert.equal(r.reasonCode, 'ENGINE_STOPPED')
  assert.match(r.reason, /nothing answers: the engine is stopped/)
  assert.match(r.reason, /unset DOCKER_HOST/)
})

test('a socket that accepts and never answers: gives up within the timeout', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'docker.sock')
  await socketServer(t, sock, () => { /* accept, read, never answer */ })
  const started = Date.now()
  const r = await checkEngine({ timeoutMs: 400, env: isolatedEnv(dir, { DOCKER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'docker' }) })
  const elapsed = Date.now() - started
  assert.equal(r.reasonCode, 'ENGINE_TIMEOUT')
  assert.match(r.reason, /did not answer ping within 400 ms: the engine is hung/)
  // Functional bound: it gave up, rather than hanging on the silent socket.
  assert.ok(elapsed < 10000, `took ${elapsed} ms`)
})

test('the timeout can come from PO_SANDBOX_ENGINE_TIMEOUT_MS, and a bad value is a coded error', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'docker.sock')
  await socketServer(t, sock)
  const env = isolatedEnv(dir, { DOCKER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'docker' })
  const r = await checkEngine({ env: { ...env, PO_SANDBOX_ENGINE_TIMEOUT_MS: '300' } })
  assert.match(r.reason, /within 300 ms/)
  await assert.rejects(checkEngine({ env: { ...env, PO_SANDBOX_ENGINE_TIMEOUT_MS: 'soon' } }), (err) => {
    assert.ok(err instanceof Error)
    assert.equal(err.code, 'OPTIONS_INVALID')
    assert.match(err.message, /PO_SANDBOX_ENGINE_TIMEOUT_MS/)
    return true
  })
})

test('an engine with an API older than 1.41 is refused as too old', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'docker.sock')
  await socketServer(t, sock, (s) => {
    s.on('data', (chunk) => {
      const body = chunk.toString().includes('/version') ? JSON.stringify({ Version: '18.09.9', ApiVersion: '1.39' }) : 'OK'
      s.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
    })
  })
  const r = await checkEngine({ env: isolatedEnv(dir, { DOCKER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'docker' }) })
  assert.equal(r.reasonCode, 'ENGINE_API_TOO_OLD')
  assert.match(r.reason, /18\.09\.9 .* serves Engine API 1\.39; po-sandbox needs 1\.41 or newer/)
})

test('a failed engine request keeps the engine error as err.cause; an unavailable engine gives err.reasonCode', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'docker.sock')
  // A Docker-shaped engine that probes fine and then fails the container listing.
  await socketServer(t, sock, (s) => {
    s.on('data', (chunk) => {
      const head = chunk.toString()
      const [status, body] = head.includes('/containers/json')
        ? ['500 Internal Server Error', JSON.stringify({ message: 'disk on fire' })]
        : ['200 OK', head.includes('/version') ? JSON.stringify({ Version: '20.10.24', ApiVersion: '1.41', Os: 'linux' }) : head.includes('/info') ? '{}' : 'OK']
      s.write(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
    })
  })
  const env = isolatedEnv(dir, { DOCKER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'docker' })
  await assert.rejects(listSandboxContainers({ env }), (err) => {
    assert.equal(err.code, 'ENGINE_REQUEST_FAILED')
    assert.match(err.message, /^The container engine failed to list containers: .*disk on fire/)
    assert.ok(err.cause instanceof Error, 'no err.cause')
    assert.match(err.cause.message, /500.*disk on fire/)
    assert.ok(!err.message.includes('Caused by:'), 'a cause already in the message is not repeated')
    assert.equal(err.reasonCode, undefined)
    return true
  })
  await assert.rejects(listSandboxContainers({ env: isolatedEnv(dir, { DOCKER_HOST: `unix://${dir}/none.sock`, PO_SANDBOX_ENGINE: 'docker' }) }), (err) => {
    assert.equal(err.code, 'ENGINE_UNAVAILABLE')
    assert.equal(err.reasonCode, 'ENGINE_NOT_INSTALLED')
    assert.match(err.message, / \[ENGINE_NOT_INSTALLED\]$/)
    return true
  })
})

test('a hung engine: a call it never answers settles as ENGINE_TIMEOUT naming the operation, within the call bound', async (t) => {
  const dir = tempDir(t)
  const sock = path.join(dir, 'docker.sock')
  // Probes fine, then accepts the container listing and never answers it (a frozen dockerd).
  let listings = 0
  await socketServer(t, sock, (s) => {
    s.on('data', (chunk) => {
      const head = chunk.toString()
      if (head.includes('/containers/json')) {
        listings += 1
        return
      }
      const body = head.includes('/version') ? JSON.stringify({ Version: '20.10.24', ApiVersion: '1.41', Os: 'linux' }) : head.includes('/info') ? '{}' : 'OK'
      s.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
    })
  })
  const env = isolatedEnv(dir, { DOCKER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'docker', PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS: '1000' })
  const started = Date.now()
  await assert.rejects(listSandboxContainers({ env }), (err) => {
    assert.equal(err.code, 'ENGINE_TIMEOUT')
    assert.match(err.message, /^The container engine did not answer in time to list containers \(bound: 1000 ms, PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS\); it may be hung/)
    return true
  })
  const elapsed = Date.now() - started
  assert.equal(listings, 1, 'the listing reached the engine')
  assert.ok(elapsed >= 900, `settled after ${elapsed} ms, before the bound`)
  assert.ok(elapsed < 20000, `took ${elapsed} ms`)
  // A bad bound is a coded error before any engine I/O.
  assert.throws(() => listSandboxContainers({ env: { ...env, PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS: '500' } }), (err) => {
    assert.equal(err.code, 'OPTIONS_INVALID')
    assert.match(err.message, /PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS: '500' is not a whole number of milliseconds between 1000 and 600000/)
    return true
  })
  assert.equal(listings, 1)
})

test('a TCP DOCKER_HOST with nothing listening is stopped; an ssh:// one says why ssh failed; a malformed one is unsupported', async (t) => {
  const dir = tempDir(t)
  const server = net.createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  let r = await checkEngine({ env: isolatedEnv(dir, { DOCKER_HOST: `tcp://127.0.0.1:${port}`, PO_SANDBOX_ENGINE: 'docker' }) })
  assert.equal(r.reasonCode, 'ENGINE_STOPPED')
  // No such ssh command; then nothing listening on the port.
  r = await checkEngine({ env: isolatedEnv(dir, { DOCKER_HOST: `ssh://me@127.0.0.1:${port}`, PO_SANDBOX_ENGINE: 'docker', PO_SANDBOX_SSH_COMMAND: path.join(dir, 'no-ssh') }) })
  assert.equal(r.reasonCode, 'ENGINE_SSH_FAILED')
  assert.match(r.reason, /cannot run .*no-ssh .*Install the OpenSSH client, or set PO_SANDBOX_SSH_COMMAND/)
  r = await checkEngine({ env: isolatedEnv(dir, { DOCKER_HOST: `ssh://me@127.0.0.1:${port}`, PO_SANDBOX_ENGINE: 'docker', PATH: process.env.PATH }) })
  assert.equal(r.reasonCode, 'ENGINE_SSH_FAILED')
  assert.match(r.reason, /Connection refused/)
  // An option where the host should be never reaches ssh.
  r = await checkEngine({ env: isolatedEnv(dir, { DOCKER_HOST: 'ssh://-oProxyCommand=touch${IFS}/tmp/x', PO_SANDBOX_ENGINE: 'docker' }) })
  assert.equal(r.reasonCode, 'ENGINE_UNSUPPORTED_ENDPOINT')
  assert.match(r.reason, /not a host name or address ssh can take/)
})

test('nerdctl and finch are reported as having no Docker-compatible API', async (t) => {
  const dir = tempDir(t)
  const bin = path.join(dir, 'nerdctl')
  writeFileSync(bin, '#!/bin/sh\n', { mode: 0o755 })
  const r = await checkEngine({ env: isolatedEnv(dir, { PO_SANDBOX_ENGINE: 'nerdctl' }) })
  assert.equal(r.available, false)
  assert.equal(r.reasonCode, 'ENGINE_NO_DOCKER_API')
  assert.match(r.reason, /nerdctl serves no Docker-compatible Engine API/)
})

test('PO_SANDBOX_ENGINE=bogus is a coded error listing the valid engines, sync and async alike', async (t) => {
  const dir = tempDir(t)
  const env = isolatedEnv(dir, { PO_SANDBOX_ENGINE: 'bogus' })
  await assert.rejects(checkEngine({ env }), (err) => {
    assert.ok(err instanceof Error)
    assert.equal(err.code, 'ENGINE_UNKNOWN')
    assert.match(err.message, /'bogus' \(from PO_SANDBOX_ENGINE\).*docker, podman, nerdctl, finch/)
    return true
  })
  assert.throws(() => engineCandidates({ env }), (err) => {
    assert.ok(err instanceof Error)
    assert.equal(err.code, 'ENGINE_UNKNOWN')
    return true
  })
  // Mistyped options throw synchronously, before any Promise.
  for (const bad of [{ timeoutMs: 'soon' }, { timeoutMs: -1 }, { timeoutMs: 1.5 }, 5, 'docker']) {
    assert.throws(() => checkEngine(bad), (err) => err instanceof Error && err.code === 'OPTIONS_INVALID', JSON.stringify(bad))
  }
})

test('engineCandidates lists the detection order without I/O', () => {
  const list = engineCandidates({ env: { HOME: '/home/u', XDG_RUNTIME_DIR: '/run/user/1000' } })
  assert.deepEqual([...new Set(list.map((c) => c.engine))], ['docker', 'podman', 'nerdctl', 'finch'])
  assert.deepEqual(list.slice(0, 3).map((c) => c.endpoint), [
    'unix:///var/run/docker.sock',
    'unix:///run/user/1000/docker.sock',
    'unix:///home/u/.docker/run/docker.sock',
  ])
  assert.ok(list.some((c) => c.source === 'Colima'))
  assert.ok(list.some((c) => c.engine === 'podman' && c.source === 'rootless' && c.endpoint === 'unix:///run/user/1000/podman/podman.sock'))
  assert.ok(list.every((c) => c.outcome === 'untried'))
})

test('Docker contexts: DOCKER_CONTEXT over currentContext, DOCKER_HOST over both, coded errors for broken files', async (t) => {
  await requireDocker()
  const dir = tempDir(t)
  const config = path.join(dir, 'docker-config')
  const link = path.join(dir, 'real.sock')
  symlinkSync('/var/run/docker.sock', link)
  /** Writes a context's meta.json where the docker CLI keeps it. */
  const context = (name, host) => {
    const meta = path.join(config, 'contexts', 'meta', createHash('sha256').update(name).digest('hex'))
    mkdirSync(meta, { recursive: true })
    writeFileSync(path.join(meta, 'meta.json'), JSON.stringify({ Name: name, Metadata: {}, Endpoints: { docker: { Host: host, SkipTLSVerify: false } } }))
  }
  context('works', `unix://${link}`)
  context('dead', `unix://${dir}/nothing.sock`)
  mkdirSync(config, { recursive: true })
  writeFileSync(path.join(config, 'config.json'), JSON.stringify({ auths: {}, currentContext: 'dead' }))
  const env = (extra) => isolatedEnv(dir, { DOCKER_CONFIG: config, PO_SANDBOX_ENGINE: 'docker', ...extra })

  const current = await checkEngine({ env: env({}) })
  assert.equal(current.available, false)
  assert.deepEqual(current.candidates.map((c) => [c.endpoint, c.source, c.context, c.outcome]), [[`unix://${dir}/nothing.sock`, 'currentContext', 'dead', 'not-found']])

  const chosen = await checkEngine({ env: env({ DOCKER_CONTEXT: 'works' }) })
  assert.equal(chosen.available, true)
  assert.equal(chosen.context, 'works')
  assert.equal(chosen.source, 'DOCKER_CONTEXT')
  assert.equal(chosen.endpoint, `unix://${link}`)

  const host = await checkEngine({ env: env({ DOCKER_CONTEXT: 'dead', DOCKER_HOST: `unix://${link}` }) })
  assert.equal(host.available, true)
  assert.equal(host.source, 'DOCKER_HOST')
  assert.equal(host.context, undefined)

  // engineCandidates shows the same choice without probing.
  assert.deepEqual(engineCandidates({ env: env({ DOCKER_CONTEXT: 'works' }) }).map((c) => [c.source, c.context]), [['DOCKER_CONTEXT', 'works']])

  // A malformed config: rejected with the file and the fix; nothing probed.
  writeFileSync(path.join(config, 'config.json'), '{"currentContext": ')
  await assert.rejects(checkEngine({ env: env({}) }), (e) => {
    assert.equal(e.code, 'ENGINE_CONTEXT_INVALID')
    assert.match(e.message, new RegExp(`${config}/config\\.json is not valid JSON`))
    assert.match(e.message, /Fix or remove the file/)
    return true
  })
  // …unless only Podman is looked for: Docker's config is not read then.
  const podman = await checkEngine({ env: env({ PO_SANDBOX_ENGINE: 'podman', CONTAINER_HOST: `unix://${dir}/p.sock` }) })
  assert.equal(podman.reasonCode, 'ENGINE_NOT_INSTALLED')
  // A context that is not there.
  writeFileSync(path.join(config, 'config.json'), JSON.stringify({ currentContext: 'gone' }))
  assert.throws(() => engineCandidates({ env: env({}) }), (e) => {
    assert.equal(e.code, 'ENGINE_CONTEXT_INVALID')
    assert.match(e.message, /the Docker context 'gone' \(from currentContext "gone" in .*config\.json\) does not exist/)
    return true
  })
})
