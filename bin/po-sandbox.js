#!/usr/bin/env node
'use strict'
// The po-sandbox command: parses arguments and prints; every check runs in the Rust addon.

const USAGE = `Usage: po-sandbox <command> [options]

Commands:
  doctor              Check whether the sandbox layer can run here: Node.js and every
                      container engine candidate. Exits 0 when ready, 1 when not.
  help                Show this text.

Options:
  --json              Print the report as JSON instead of text.
  --timeout-ms <ms>   Bound each engine step (connect, ping, version, info); default 3000.
  --engine <name>     Check only this engine: docker, podman, nerdctl or finch.
`

function fail(message) {
  process.stderr.write(`po-sandbox: ${message}\n\n${USAGE}`)
  process.exit(2)
}

function parse(argv) {
  const opts = { command: undefined, json: false, timeoutMs: undefined, engine: undefined }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--json') opts.json = true
    else if (arg === '--timeout-ms' || arg === '--engine') {
      const value = argv[++i]
      if (value === undefined) fail(`${arg} needs a value`)
      if (arg === '--engine') opts.engine = value
      else {
        const ms = Number(value)
        if (!Number.isInteger(ms) || ms < 1 || ms > 600000) fail(`--timeout-ms must be a whole number from 1 to 600000, not '${value}'`)
        opts.timeoutMs = ms
      }
    } else if (arg === '-h' || arg === '--help') opts.command = 'help'
    else if (arg.startsWith('-')) fail(`unknown option '${arg}'`)
    else if (opts.command === undefined) opts.command = arg
    else fail(`unexpected argument '${arg}'`)
  }
  return opts
}

async function main() {
  const opts = parse(process.argv.slice(2))
  if (opts.command === undefined || opts.command === 'help') {
    process.stdout.write(USAGE)
    return 0
  }
  if (opts.command !== 'doctor') fail(`unknown command '${opts.command}'`)
  let addon
  try {
    addon = require('../index.js')
  } catch (err) {
    process.stderr.write(`po-sandbox: the native addon could not be loaded (${err.message}).\nReinstall @agimon-ai/po-sandbox for this platform (${process.platform}-${process.arch}), or build it with 'npm run build'.\n`)
    return 1
  }
  try {
    const report = await addon.doctor(process.version, { timeoutMs: opts.timeoutMs, engine: opts.engine })
    process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : report.text)
    return report.ok ? 0 : 1
  } catch (err) {
    if (opts.json) process.stdout.write(`${JSON.stringify({ ok: false, error: { code: err.code, message: err.message } }, null, 2)}\n`)
    else process.stderr.write(`po-sandbox: ${err.message} [${err.code}]\n`)
    return 1
  }
}

main().then((code) => { process.exitCode = code })
