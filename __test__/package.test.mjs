// The package's shape: generated files match the exports, per-platform packages exist.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, existsSync } from 'node:fs'
import path from 'node:path'

import net from 'node:net'

import { addon, root, run, tempDir, waitFor } from './helpers.mjs'

const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))

test('index.d.ts declares exactly what index.js exports', () => {
  const dts = readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const declared = [...dts.matchAll(/^export declare (?:function|class|const) (\w+)/gm)].map((m) => m[1])
  // String enums are exported as objects of their values (ProviderState.Ready === 'ready') and declared as unions.
  const unions = new Map(
    [...dts.matchAll(/^export type (\w+) = ((?:'[a-z-]+'(?: \| )?)+)$/gm)].map((m) => [m[1], m[2].split(' | ').map((v) => v.slice(1, -1))]),
  )
  const enums = Object.keys(addon).filter((k) => unions.has(k))
  assert.deepEqual(enums.sort(), ['ImagePhase', 'ProviderState', 'RouteKind', 'WorkspaceChange', 'WorkspacePhase'])
  for (const name of enums) assert.deepEqual(Object.values(addon[name]).sort(), [...unions.get(name)].sort(), name)
  assert.deepEqual(Object.keys(addon).filter((k) => !unions.has(k)).sort(), declared.sort())
  for (const name of ['checkEngine', 'engineCandidates', 'doctor', 'DefaultSandboxExtensionService']) assert.ok(declared.includes(name), name)
})

test('package.json: name, engines, bin, files, license', () => {
  assert.equal(pkg.name, '@agimon-ai/po-sandbox')
  assert.equal(pkg.engines.node, '>= 24')
  assert.equal(pkg.license, 'MIT')
  for (const f of ['index.js', 'index.d.ts', 'bin/', 'extensions/']) assert.ok(pkg.files.includes(f), f)
  assert.ok(existsSync(path.join(root, 'LICENSE')))
  assert.match(readFileSync(path.join(root, 'LICENSE'), 'utf8'), /^MIT License/)
})

test('one npm package per prebuilt platform', () => {
  const triples = ['linux-x64-gnu', 'linux-arm64-gnu', 'darwin-x64', 'darwin-arm64', 'win32-x64-msvc']
  for (const triple of triples) {
    const p = JSON.parse(readFileSync(path.join(root, 'npm', triple, 'package.json'), 'utf8'))
    assert.equal(p.name, `@agimon-ai/po-sandbox-${triple}`)
    assert.equal(p.main, `po-sandbox.${triple}.node`)
    assert.equal(p.version, pkg.version)
  }
})

test('loading the addon (and listing candidates) touches no engine; checkEngine does', async (t) => {
  // The engine endpoints point at a socket this test listens on, so any engine I/O shows up.
  const dir = tempDir(t, 'po-load-')
  const sock = path.join(dir, 'engine.sock')
  let connections = 0
  const server = net.createServer((c) => { connections++; c.destroy() })
  await new Promise((resolve) => server.listen(sock, resolve))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  const env = { PATH: process.env.PATH, HOME: dir, DOCKER_HOST: `unix://${sock}`, CONTAINER_HOST: `unix://${sock}`, PO_SANDBOX_ENGINE: 'docker' }
  const load = `const a = require(${JSON.stringify(path.join(root, 'index.js'))}); if (typeof a.checkEngine !== 'function') process.exit(3); a.engineCandidates()`
  const loaded = await run(process.execPath, ['-e', load], { env })
  assert.equal(loaded.code, 0, loaded.stderr)
  await new Promise((r) => setTimeout(r, 200)) // let any accept the child caused be seen
  assert.equal(connections, 0, 'loading the addon connected to the engine socket')
  // The control: the same setup does see a probe.
  const probe = `require(${JSON.stringify(path.join(root, 'index.js'))}).checkEngine({ timeoutMs: 2000 }).then((r) => console.log(r.available))`
  const probed = await run(process.execPath, ['-e', probe], { env })
  assert.equal(probed.code, 0, probed.stderr)
  assert.equal(probed.stdout.trim(), 'false')
  await waitFor(() => connections >= 1, 'checkEngine to reach the socket')
})
