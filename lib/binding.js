// @ts-check
'use strict'
// The native module, loaded once for every file of the facade. lib/load-native.js loads the
// generated loader (native.js) from CommonJS, ESM and bundles, and says what was wrong when it
// cannot. `path` and `fs` come from there too: in an ESM bundle a later require('node:path')
// would meet esbuild's stub, so the other files take them from here.
module.exports = require('./load-native.js').loadNative()
