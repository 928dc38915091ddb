// The package's shape: generated files match the exports, per-platform packages exist.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, existsSync } from 'node:fs'
import path from 'node:path'

import net from 'node:net'

import { addon, require, root, run, tempDir, waitFor } from './helpers.mjs'

const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))

test('index.d.ts declares exactly what index.js exports', () => {
  const dts = readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const declared = [...dts.matchAll(/^export declare (?:function|class|const) (\w+)/gm)].map((m) => m[1])
  // String enums are exported as objects of their values (ProviderState.Ready === 'ready') and declared as unions.
  const unions = new Map(
    [...dts.matchAll(/^export type (\w+) = ((?:'[a-z-]+'(?: \| )?)+)$/gm)].map((m) => [m[1], m[2].split(' | ').map((v) => v.slice(1, -1))]),
  )
  const enums = Object.keys(addon).filter((k) => unions.has(k))
  assert.deepEqual(enums.sort(), ['CandidateOutcome', 'CloneOutcome', 'EgressDecision', 'ImagePhase', 'PolicyState', 'ProviderState', 'ReviewChangeKind', 'ReviewClass', 'RouteKind', 'WorkspaceChange', 'WorkspacePhase'])
  for (const name of enums) assert.deepEqual(Object.values(addon[name]).sort(), [...unions.get(name)].sort(), name)
  assert.deepEqual(Object.keys(addon).filter((k) => !unions.has(k)).sort(), declared.sort())
  for (const name of ['checkEngine', 'engineCandidates', 'doctor', 'DefaultSandboxExtensionService']) assert.ok(declared.includes(name), name)
})

test('package.json: name, engines, bin, files', () => {
  assert.equal(pkg.name, '@agimon-ai/po-sandbox')
  assert.equal(pkg.engines.node, '>= 24')
  for (const f of ['index.js', 'index.d.ts', 'bin/', 'extensions/']) assert.ok(pkg.files.includes(f), f)
})

test('the license: BUSL-1.1 in LICENSE, package.json, Cargo.toml, the platform packages and the README agree', () => {
  const license = readFileSync(path.join(root, 'LICENSE'), 'utf8')
  // The Business Source License 1.1 with all five parameters filled in.
  assert.match(license, /^Business Source License 1\.1\n/)
  const param = (name) => {
    const m = license.match(new RegExp(`^${name}:\\s+(.+)$`, 'm'))
    assert.ok(m, `LICENSE has no ${name} parameter`)
    return m[1].trim()
  }
  assert.match(param('Licensor'), /^Agimon\b/)
  assert.equal(param('Licensed Work'), `${pkg.name} ${pkg.version}`)
  const changeDate = param('Change Date')
  assert.match(changeDate, /^\d{4}-\d{2}-\d{2}$/)
  assert.equal(param('Change License'), 'Apache License, Version 2.0')
  const grant = license.slice(license.indexOf('Additional Use Grant:'), license.indexOf('Change Date:')).replace(/\s+/g, ' ')
  for (const use of ['personal purposes', 'less than USD 1,000,000', 'non-profit organisation', 'educational institution']) assert.ok(grant.includes(use), use)
  // The standard terms, unmodified in their key sentences.
  for (const clause of ['make non-production use of the Licensed Work', 'the fourth anniversary of the first publicly', 'Covenants of Licensor', 'is not an Open\nSource license']) {
    assert.ok(license.includes(clause), clause)
  }
  // Every manifest carries the SPDX id.
  assert.equal(pkg.license, 'BUSL-1.1')
  assert.match(readFileSync(path.join(root, 'Cargo.toml'), 'utf8'), /^license = "BUSL-1\.1"$/m)
  for (const triple of ['linux-x64-gnu', 'linux-arm64-gnu', 'darwin-x64', 'darwin-arm64', 'win32-x64-msvc']) {
    assert.equal(JSON.parse(readFileSync(path.join(root, 'npm', triple, 'package.json'), 'utf8')).license, 'BUSL-1.1', triple)
  }
  assert.ok(pkg.files.includes('LICENSE'))
  // The README's section names the same license, grant, date and change license.
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('\n## License\n')).replace(/\s+/g, ' ')
  for (const words of ['Business Source License 1.1', '`BUSL-1.1`', 'personal use', 'USD 1M', 'non-profits', 'education', changeDate, 'Apache License, Version 2.0']) {
    assert.ok(section.includes(words), `README's License section lacks ${words}`)
  }
  assert.doesNotMatch(section, /\bMIT\b/)
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

test('npm pack --dry-run ships exactly the published files', async () => {
  const r = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, env: { ...process.env, npm_config_loglevel: 'error' } })
  assert.equal(r.code, 0, r.stderr)
  const [packed] = JSON.parse(r.stdout)
  assert.equal(packed.name, pkg.name)
  const files = packed.files.map((f) => f.path).sort()
  assert.deepEqual(files, [
    'LICENSE',
    'README.md',
    'bin/pi-in-sandbox.js',
    'bin/po-sandbox.js',
    'bin/sandbox-commands.js',
    'docs/sandbox-policy.schema.json',
    'extensions/apiContracts.cjs',
    'extensions/apiContracts.d.cts',
    'extensions/apiContracts.d.mts',
    'extensions/apiContracts.mjs',
    'extensions/server.js',
    'index.d.ts',
    'index.js',
    'package.json',
  ])
  for (const f of files) assert.doesNotMatch(f, /^(__test__|src|target|npm|scripts|bench|node_modules)\/|\.node$/, f)
  // Every path the exports map and the manifest name is in the tarball.
  const named = [pkg.main, pkg.types, ...Object.values(pkg.bin), ...pkg.pi.extensions]
  const walk = (v) => (typeof v === 'string' ? named.push(v) : Object.values(v).forEach(walk))
  walk(pkg.exports)
  for (const p of named) assert.ok(files.includes(path.posix.normalize(p)), `${p} is named by package.json but not packed`)
})

const CONTRACT = { version: 1, http: [], sockets: [], dynamic: [] }

test('./apiContracts: require() and import() give the same contract, as seed 001 shipped it', async () => {
  // Through the package's own name, so the exports map is what resolves it.
  const cjs = require('@agimon-ai/po-sandbox/apiContracts')
  assert.deepEqual({ ...cjs.apiContracts }, CONTRACT)
  assert.equal(cjs.default, cjs.apiContracts)
  assert.equal(cjs.__esModule, true)
  const esm = await import('@agimon-ai/po-sandbox/apiContracts')
  assert.deepEqual(Object.keys(esm).sort(), ['apiContracts', 'default'])
  assert.equal(esm.default, esm.apiContracts)
  assert.equal(esm.apiContracts, cjs.apiContracts, 'one object for both module systems')
  // Read-only, deeply: no consumer can change what another one reads.
  assert.ok(Object.isFrozen(cjs.apiContracts))
  for (const list of ['http', 'sockets', 'dynamic']) assert.ok(Object.isFrozen(cjs.apiContracts[list]), list)
  assert.throws(() => cjs.apiContracts.http.push({}), TypeError)
  assert.deepEqual(JSON.parse(JSON.stringify(esm.default)), CONTRACT)
})

test('the exports map keeps the package root, its manifest, the extension, the CLI and the policy schema reachable, and nothing else', async () => {
  const main = require('@agimon-ai/po-sandbox')
  assert.equal(main, addon, 'the root export is index.js')
  assert.equal((await import('@agimon-ai/po-sandbox')).default, addon)
  assert.equal(require('@agimon-ai/po-sandbox/package.json').name, pkg.name)
  assert.equal(typeof require('@agimon-ai/po-sandbox/extensions/server.js'), 'function')
  assert.equal(require.resolve('@agimon-ai/po-sandbox/bin/po-sandbox.js'), path.join(root, 'bin', 'po-sandbox.js'))
  assert.equal(require.resolve('@agimon-ai/po-sandbox/sandbox-policy.schema.json'), path.join(root, 'docs', 'sandbox-policy.schema.json'))
  for (const hidden of ['@agimon-ai/po-sandbox/index.js', '@agimon-ai/po-sandbox/src/lib.rs', '@agimon-ai/po-sandbox/apiContracts.cjs', '@agimon-ai/po-sandbox/__test__/helpers.mjs']) {
    assert.throws(() => require.resolve(hidden), { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' }, hidden)
  }
})
