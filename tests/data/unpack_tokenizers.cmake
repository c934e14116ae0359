# The tokenizer suites are committed as one archive (tokenizers.tar.xz: 1 MB instead of 10, so the
# working tree stays small); every build that runs them unpacks it into its own binary folder.
# Sets TPBATCH_TEST_TOKENIZERS_DIR to <binary dir>/test-data/tokenizers.
set(_archive "${CMAKE_CURRENT_LIST_DIR}/tokenizers.tar.xz")
set(TPBATCH_TEST_TOKENIZERS_DIR "${CMAKE_BINARY_DIR}/test-data/tokenizers")
file(REMOVE_RECURSE "${TPBATCH_TEST_TOKENIZERS_DIR}")
file(ARCHIVE_EXTRACT INPUT "${_archive}" DESTINATION "${CMAKE_BINARY_DIR}/test-data")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_archive}")
