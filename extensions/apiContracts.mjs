// `@agimon-ai/po-sandbox/apiContracts` for `import`: the very object the CommonJS entry exports.
import cjs from './apiContracts.cjs'

/** This facet contributes agent tools, commands or lifecycle only, with no separate HTTP or socket surface. */
export const apiContracts = cjs.apiContracts
export default apiContracts
