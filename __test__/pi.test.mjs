// The real pi coding agent loads the package's extension from its own manifest and answers
// /po-sandbox in RPC mode.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, existsSync, mkdirSync } from 'node:fs'
import path from 'node:path'

import { addon, piBin, root, rpcInPi, slashCommandInPi, tempDir } from './helpers.mjs'

/** Runs `/po-sandbox` in pi's RPC mode with the package directory as the extension. */
const poSandboxInPi = (t, extraEnv) => slashCommandInPi(t, { extension: root, env: extraEnv })

test('the package manifest declares the pi extension', () => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
  assert.ok(pkg.keywords.includes('pi-package'))
  assert.deepEqual(pkg.pi.extensions, ['./extensions/server.js'])
  assert.ok(existsSync(path.join(root, pkg.pi.extensions[0])))
  assert.ok(existsSync(piBin), `pi is not installed at ${piBin}: run npm install`)
})

test('/po-sandbox in the real pi on the host says the session runs on the host', async (t) => {
  const msg = await poSandboxInPi(t, {})
  assert.equal(msg.notifyType, 'info')
  assert.match(msg.message, /runs directly on the host, not in a sandbox container/)
})

test('/po-sandbox in the real pi with PO_SANDBOX=1 says it runs inside a sandbox container', async (t) => {
  const msg = await poSandboxInPi(t, { PO_SANDBOX: '1', PO_WORKSPACE: 'acme' })
  assert.equal(msg.notifyType, 'info')
  assert.match(msg.message, /runs inside a sandbox container, for workspace "acme"/)
})

test('/po-sandbox reports contradictory broker variables as a warning', async (t) => {
  const msg = await poSandboxInPi(t, { PO_SANDBOX: '1', PO_WORKSPACE: 'acme', PO_BROKER_PROVIDERS: 'openai', PO_BROKER_SOCKET: '/a.sock', PO_BROKER_ADDRESS: '127.0.0.1:1' })
  assert.equal(msg.notifyType, 'warning')
  assert.match(msg.message, /Both PO_BROKER_SOCKET and PO_BROKER_ADDRESS are set/)
})

/** pi's own list of commands (extension commands, prompt templates and skills) via RPC. */
async function piCommands(t, env, { cwd, home, onResponse } = {}) {
  const { responses } = await rpcInPi(t, { extension: root, env, cwd, home, onResponse, commands: [{ type: 'get_commands' }] })
  assert.equal(responses[0].success, true, JSON.stringify(responses[0]))
  return responses[0].data.commands
}

test('the help skill: the real pi discovers skill:po-sandbox in a contained session, with the facts /po-sandbox reports', async (t) => {
  const dir = tempDir(t, 'po-help-')
  const workspace = path.join(dir, 'acme')
  const poHome = path.join(dir, 'po', 'sandboxes', 'acme')
  mkdirSync(workspace, { recursive: true })
  mkdirSync(poHome, { recursive: true })
  const env = {
    PO_SANDBOX: '1',
    PO_WORKSPACE: 'acme',
    PO_HOME: poHome,
    PO_SANDBOX_TOKEN_FILE: '/run/po-sandbox/token',
    PO_SANDBOX_GUARDED_PATHS: `${workspace}/.git/hooks,${workspace}/.envrc`,
    // A TCP route: no bridge to start, and no model call is made, so nothing is sent to it.
    PO_BROKER_PROVIDERS: 'anthropic',
    PO_BROKER_ADDRESS: '127.0.0.1:9',
  }
  const home = path.join(dir, 'home')
  mkdirSync(home)
  // Read while pi runs: the file pi found is the addon's skill for this very environment.
  let text
  const commands = await piCommands(t, env, {
    cwd: workspace,
    home,
    onResponse: (msg) => {
      const found = msg.data.commands.find((c) => c.name === 'skill:po-sandbox')
      if (found) text = readFileSync(found.sourceInfo.path, 'utf8')
    },
  })
  const skill = commands.find((c) => c.name === 'skill:po-sandbox')
  assert.ok(skill, `pi lists no skill:po-sandbox: ${JSON.stringify(commands.map((c) => c.name))}`)
  assert.equal(skill.source, 'skill')
  assert.match(skill.description, /Po sandbox container/)
  assert.ok(commands.some((c) => c.name === 'po-sandbox' && c.source === 'extension'), 'the /po-sandbox command is there too')
  assert.equal(text, new addon.DefaultSandboxExtensionService({ ...env, HOME: home }).helpSkill(workspace))
  for (const fact of ['workspace "acme"', `\`${workspace}\``, `\`${poHome}\` (\`PO_HOME\`)`, `\`${workspace}/.envrc\``, 'Brokered: `anthropic`, via the broker at `127.0.0.1:9`', 'No OAuth `/login`']) {
    assert.ok(text.includes(fact), `${fact} missing in:\n${text}`)
  }
  const file = skill.sourceInfo.path
  assert.match(path.basename(file), /^SKILL\.md$/)
  assert.match(path.basename(path.dirname(file)), /^po-sandbox$/)
  // pi has exited: its session_shutdown removed the skill's folder.
  assert.equal(existsSync(file), false, `the help skill was left at ${file}`)
})

test('the help skill: its text is what the addon writes for the container\'s variables', async (t) => {
  const dir = tempDir(t, 'po-help-')
  const workspace = path.join(dir, 'acme')
  mkdirSync(workspace, { recursive: true })
  const env = { PO_SANDBOX: '1', PO_WORKSPACE: 'acme', PO_HOME: path.join(dir, 'p'), HOME: '/po-home', PO_SANDBOX_GUARDED_PATHS: `${workspace}/.git/config` }
  const md = new addon.DefaultSandboxExtensionService(env).helpSkill(workspace)
  assert.ok(md.startsWith('---\nname: po-sandbox\ndescription: '))
  for (const fact of ['workspace "acme"', `\`${workspace}\``, '`/po-home` (`HOME`)', `\`${path.join(dir, 'p')}\` (\`PO_HOME\`)`, '`/opt/po`', `\`${workspace}/.git/config\``,
    'No providers are brokered', 'firewall rules loaded before this container started', 'No container engine', 'No host paths beyond the mounts', 'No OAuth `/login`']) {
    assert.ok(md.includes(fact), `${fact} missing in:\n${md}`)
  }
  assert.equal(new addon.DefaultSandboxExtensionService({}).helpSkill(workspace), null)
  assert.equal(new addon.DefaultSandboxExtensionService({ PO_SANDBOX: '1' }).helpSkill(), new addon.DefaultSandboxExtensionService({ PO_SANDBOX: '1' }).helpSkill(undefined))
})

test('the help skill is absent on the host: the real pi lists /po-sandbox but no skill:po-sandbox', async (t) => {
  const commands = await piCommands(t, {})
  assert.ok(commands.some((c) => c.name === 'po-sandbox' && c.source === 'extension'), JSON.stringify(commands))
  assert.equal(commands.filter((c) => c.source === 'skill' && /po-sandbox/.test(c.name)).length, 0, JSON.stringify(commands))
})
