'use strict'
// The pi extension of @agimon-ai/po-sandbox: thin glue, all logic lives in the Rust addon.
// The factory only registers; it starts no socket and no timer.

const { DefaultSandboxExtensionService } = require('../index.js')

/** @param {import('@earendil-works/pi-coding-agent').ExtensionAPI} pi */
function poSandboxExtension(pi) {
  pi.registerCommand('po-sandbox', {
    description: 'Show whether this session runs inside a Po sandbox container, and its brokered providers',
    handler: async (_args, ctx) => {
      const service = new DefaultSandboxExtensionService(process.env)
      const level = service.state().problems.length > 0 ? 'warning' : 'info'
      ctx.ui.notify(service.report(), level)
    },
  })
}

module.exports = poSandboxExtension
module.exports.default = poSandboxExtension
