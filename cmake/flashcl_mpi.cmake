# flashcl_mpi: ring (context-parallel) attention across MPI processes, on
# top of flashcl's public API (include/flashcl_mpi.h, src/ring/, cl/ring/).
# Included from the top-level CMakeLists.txt when MPI is found.
file(GLOB FCL_RING_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/ring/*.c)
# Its one program's top file; embed_cl.cmake adds what it requires (dtype.cl),
# which is among the library's kernels (FCL_CL_SOURCES) for DEPENDS.
set(FCL_RING_CL ${CMAKE_CURRENT_SOURCE_DIR}/cl/ring/ring_copy.cl)
set(FCL_RING_EMBEDDED_C ${CMAKE_CURRENT_BINARY_DIR}/fcl_ring_kernels.c)
string(REPLACE ";" "|" _fcl_ring_cl_list "${FCL_RING_CL}")
add_custom_command(
  OUTPUT ${FCL_RING_EMBEDDED_C}
  COMMAND ${CMAKE_COMMAND} "-DOUTPUT=${FCL_RING_EMBEDDED_C}" "-DSOURCES=${_fcl_ring_cl_list}"
          "-DBASE=${CMAKE_CURRENT_SOURCE_DIR}/cl" "-DTABLE=fcl_ring_sources"
          -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_cl.cmake
  DEPENDS ${FCL_RING_CL} ${FCL_CL_SOURCES} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_cl.cmake
  COMMENT "Embedding flashcl_mpi's kernels" VERBATIM)

add_library(flashcl_mpi_objects OBJECT ${FCL_RING_SOURCES} ${FCL_RING_EMBEDDED_C})
set_target_properties(flashcl_mpi_objects PROPERTIES POSITION_INDEPENDENT_CODE ON
                      C_VISIBILITY_PRESET hidden)
target_compile_options(flashcl_mpi_objects PRIVATE ${FCL_WARNINGS})
target_compile_definitions(flashcl_mpi_objects PRIVATE FCL_MPI_BUILDING CL_TARGET_OPENCL_VERSION=120)
target_include_directories(flashcl_mpi_objects PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(flashcl_mpi_objects PRIVATE OpenCL::OpenCL MPI::MPI_C)

add_library(flashcl_mpi SHARED $<TARGET_OBJECTS:flashcl_mpi_objects>)
add_library(flashcl_mpi_static STATIC $<TARGET_OBJECTS:flashcl_mpi_objects>)
set_target_properties(flashcl_mpi_static PROPERTIES OUTPUT_NAME flashcl_mpi)
set_target_properties(flashcl_mpi PROPERTIES VERSION ${PROJECT_VERSION}
                      SOVERSION ${FCL_SOVERSION})
target_link_libraries(flashcl_mpi PUBLIC flashcl MPI::MPI_C OpenCL::OpenCL)
target_link_libraries(flashcl_mpi_static PUBLIC flashcl_static MPI::MPI_C OpenCL::OpenCL)
foreach(t flashcl_mpi flashcl_mpi_static)
  target_include_directories(${t} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
add_library(flashcl::flashcl_mpi ALIAS flashcl_mpi)
add_library(flashcl::flashcl_mpi_static ALIAS flashcl_mpi_static)
set(FCL_MPI_BUILT ON)

# Installed beside flashcl: its own export set (flashclMpiTargets.cmake, read
# by flashclConfig.cmake for COMPONENTS mpi) and flashcl-mpi.pc.
function(fcl_mpi_install)
  install(TARGETS flashcl_mpi flashcl_mpi_static EXPORT flashclMpiTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES include/flashcl_mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT flashclMpiTargets NAMESPACE flashcl::
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/flashcl)
  # MPI's flags as CMake found them (pkg-config names differ by MPI).
  set(FCL_MPI_CFLAGS "")
  foreach(dir ${MPI_C_INCLUDE_DIRS})
    string(APPEND FCL_MPI_CFLAGS " -I${dir}")
  endforeach()
  set(FCL_MPI_LIBS "")
  foreach(lib ${MPI_C_LIBRARIES})
    string(APPEND FCL_MPI_LIBS " ${lib}")
  endforeach()
  configure_file(cmake/flashcl-mpi.pc.in ${CMAKE_CURRENT_BINARY_DIR}/flashcl-mpi.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/flashcl-mpi.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
