// The package as it is published: scripts/pack.sh packs the main package and this platform's
// prebuilt package; both are installed into a fresh project without a registry, and the
// installed copy is what runs: the addon from the platform package, the CLI from `bin`, and the
// pi extension from the installed package's own manifest in the real pi.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { requireDocker, root, run, slashCommandInPi, tempDir } from './helpers.mjs'

let project
let installed

before(async () => {
  const out = tempDir({ after: (fn) => process.on('exit', fn) }, 'po-pack-out-')
  const packed = await run('bash', [path.join(root, 'scripts/pack.sh'), out])
  assert.equal(packed.code, 0, `scripts/pack.sh failed:\n${packed.stderr}`)
  const tarballs = packed.stdout.trim().split('\n')
  assert.equal(tarballs.length, 2, packed.stdout)
  for (const tgz of tarballs) assert.ok(existsSync(tgz), tgz)

  project = tempDir({ after: (fn) => process.on('exit', fn) }, 'po-pack-project-')
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'po-pack-check', private: true }))
  const npmArgs = ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', ...tarballs]
  const inst = await run('npm', npmArgs, { cwd: project })
  assert.equal(inst.code, 0, `npm install of the packed tarballs failed:\n${inst.stdout}\n${inst.stderr}`)
  installed = path.join(project, 'node_modules', '@agimon-ai', 'po-sandbox')
})

test('the main package holds no binary; the platform package brings it', () => {
  const files = readdirSync(installed)
  assert.ok(!files.some((f) => f.endsWith('.node')), files.join(' '))
  for (const f of ['index.js', 'index.d.ts', 'package.json', 'README.md', 'LICENSE', 'bin', 'extensions']) assert.ok(files.includes(f), `${f} missing from the packed package`)
  const pkg = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8'))
  assert.deepEqual(pkg.pi.extensions, ['./extensions/server.js'])
  const platform = path.join(project, 'node_modules', '@agimon-ai')
  assert.ok(readdirSync(platform).some((d) => d.startsWith('po-sandbox-') && readdirSync(path.join(platform, d)).some((f) => f.endsWith('.node'))))
})

test('the installed package finds the real engine', async () => {
  await requireDocker()
  const code = "require('@agimon-ai/po-sandbox').checkEngine({ engine: 'docker', timeoutMs: 30000 }).then((r) => console.log(JSON.stringify(r)))"
  const r = await run(process.execPath, ['-e', code], { cwd: project })
  assert.equal(r.code, 0, r.stderr)
  const report = JSON.parse(r.stdout)
  assert.equal(report.available, true, r.stdout)
  assert.equal(report.engine, 'docker')
})

test('the installed CLI runs the doctor', async (t) => {
  const home = tempDir(t, 'po-pack-home-')
  const bin = path.join(project, 'node_modules', '.bin', 'po-sandbox')
  const r = await run(bin, ['doctor', '--json', '--timeout-ms', '30000', '--po-home', home], { cwd: project, env: { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH}` } })
  // No runtime bundle in this home: not ready (exit 1), with the engine found and the reason.
  assert.equal(r.code, 1, r.stderr)
  const report = JSON.parse(r.stdout)
  assert.equal(report.engine.available, true, r.stdout)
  assert.equal(report.runtime.code, 'RUNTIME_NOT_INSTALLED', r.stdout)
})

test('the real pi loads the extension from the installed package manifest and answers /po-sandbox', async (t) => {
  const msg = await slashCommandInPi(t, { extension: installed, env: { PO_SANDBOX: '1', PO_WORKSPACE: 'packed' } })
  assert.equal(msg.notifyType, 'info')
  assert.match(msg.message, /runs inside a sandbox container, for workspace "packed"/)
})

test('the installed package: ./apiContracts by require and import, and only the exported paths', async () => {
  const cjs = await run(process.execPath, ['-e', "const m = require('@agimon-ai/po-sandbox/apiContracts'); console.log(JSON.stringify([m.apiContracts, m.default === m.apiContracts]))"], { cwd: project })
  assert.equal(cjs.code, 0, cjs.stderr)
  assert.deepEqual(JSON.parse(cjs.stdout), [{ version: 1, http: [], sockets: [], dynamic: [] }, true])
  const esm = await run(process.execPath, ['--input-type=module', '-e', "import d, { apiContracts } from '@agimon-ai/po-sandbox/apiContracts'; console.log(JSON.stringify([d, d === apiContracts]))"], { cwd: project })
  assert.equal(esm.code, 0, esm.stderr)
  assert.deepEqual(JSON.parse(esm.stdout), [{ version: 1, http: [], sockets: [], dynamic: [] }, true])
  const hidden = await run(process.execPath, ['-e', "require('@agimon-ai/po-sandbox/apiContracts.cjs')"], { cwd: project })
  assert.notEqual(hidden.code, 0)
  assert.match(hidden.stderr, /ERR_PACKAGE_PATH_NOT_EXPORTED/)
  const license = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8')).license
  assert.equal(license, 'BUSL-1.1')
  assert.match(readFileSync(path.join(installed, 'LICENSE'), 'utf8'), /^Business Source License 1\.1\n/)
})
