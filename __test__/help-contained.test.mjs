// The help skill in a really contained session: the real pi, run by `po-sandbox exec -- pi`
// inside a sandbox container on the real Docker engine (the local test base image), discovers
// skill:po-sandbox, and its SKILL.md inside tells what that container is.
import { test, before } from 'node:test'
import { spawn } from 'node:child_process'
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import path from 'node:path'

import { addon, homeOwner, onJsonLines, requireDocker, root, run, tempDir } from './helpers.mjs'

const cli = path.join(root, 'bin', 'po-sandbox.js')
const IMAGE = ['--base-image', 'po-sandbox-test-base:node24-nft', '--image-variant', 'minimal']

before(async () => {
  await requireDocker()
  const r = await run('bash', [path.join(root, 'scripts/build-test-base-image.sh')])
  assert.equal(r.code, 0, `build-test-base-image.sh failed:\n${r.stderr}`)
})

function cliEnv() {
  const env = { ...process.env }
  for (const k of Object.keys(env)) if (k.startsWith('PO_') || /_API_KEY$|_BASE_URL$/.test(k)) delete env[k]
  return env
}

/** pi in RPC mode inside the sandbox: sends each command once the previous one was answered. */
function rpcInSandbox(args, commands, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, 'exec', ...args, '--', 'pi', '--mode', 'rpc', '--no-session'], { env, stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    const responses = []
    const timer = setTimeout(() => child.kill('SIGKILL'), 120000)
    const send = () => {
      const next = commands[responses.length]
      if (!next) return child.stdin.end()
      child.stdin.write(`${JSON.stringify({ ...(typeof next === 'function' ? next(responses) : next), id: `c${responses.length}` })}\n`)
    }
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    onJsonLines(child.stdout, (msg) => {
      if (msg.type !== 'response' || msg.id !== `c${responses.length}`) return
      responses.push(msg)
      send()
    })
    child.once('error', reject)
    child.once('close', (code) => {
      clearTimeout(timer)
      if (responses.length < commands.length) reject(new Error(`pi in the sandbox exited (${code}) after ${responses.length} answers.\nstdout: ${stdout}\nstderr: ${stderr}`))
      else resolve(responses)
    })
    send()
  })
}

test('inside a sandbox container the real pi discovers skill:po-sandbox, which describes that container', async (t) => {
  const dir = tempDir(t, 'po-help-run-')
  const folder = path.join(dir, 'helped')
  mkdirSync(folder)
  const poHome = path.join(dir, 'po-home')
  const owner = homeOwner(poHome)
  const ws = addon.workspaceForFolder(folder)
  t.after(() => addon.stopSandboxContainers({ poHome, owner, workspace: ws.id, removeVolumes: true }))
  const env = cliEnv()
  const started = await run(process.execPath, [cli, 'up', folder, '--po-home', poHome, ...IMAGE, '--json'], { env })
  assert.equal(started.code, 0, started.stderr)
  const skillOf = (responses) => responses[0].data.commands.find((c) => c.name === 'skill:po-sandbox')
  const responses = await rpcInSandbox([folder, '--po-home', poHome], [
    { type: 'get_commands' },
    (answers) => ({ type: 'bash', command: `cat '${skillOf(answers)?.sourceInfo.path ?? '/nonexistent'}'`, excludeFromContext: true }),
  ], env)
  const skill = skillOf(responses)
  assert.ok(skill, `no skill:po-sandbox in the contained pi: ${JSON.stringify(responses[0].data.commands.map((c) => c.name))}`)
  assert.equal(skill.source, 'skill')
  assert.match(skill.sourceInfo.path, /^\/tmp\/po-sandbox-help-[^/]+\/po-sandbox\/SKILL\.md$/)
  assert.equal(responses[1].success, true, JSON.stringify(responses[1]))
  const md = responses[1].data.output
  assert.equal(responses[1].data.exitCode, 0, md)
  // The facts of this container: its workspace, where it is mounted, HOME, P, the guards.
  const p = path.join(poHome, 'sandboxes', ws.id)
  for (const fact of [`workspace "${ws.id}"`, `\`${folder}\``, '`/po-home` (`HOME`)', `\`${p}\` (\`PO_HOME\`)`, '`/opt/po`', `\`${folder}/.git\``, '`/run/po-sandbox/token`', 'No container engine', 'No OAuth `/login`']) {
    assert.ok(md.includes(fact), `${fact} missing in the skill inside the container:\n${md}`)
  }
})
