import pkg from '../package.json'

/** The relay's own version (reported by --version and /v1/health/details). */
export const VERSION: string = pkg.version
/** The interface version (docs/protocol.md §12). */
export const API_VERSION = '1.0.0'
